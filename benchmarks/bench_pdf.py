#!/usr/bin/env python
"""PDF text extraction: pypdfium2 (the default) vs pypdf (the fallback), same run.

A text PDF is generated with fpdf2 (no binary in the repo): ``--pages`` pages of
English prose. Each engine extracts every page ``--repeat`` times, interleaved;
the medians and their ratio are printed, with a check that both found the same
words.

    .venv/bin/python benchmarks/bench_pdf.py [--pages 40] [--repeat 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

SENTENCE = ("Robots build a picture of the world from cameras, lidar and inertial sensors, "
            "then plan and act on it through motors and controllers. ")


def make_pdf(pages: int) -> bytes:
    import fpdf

    pdf = fpdf.FPDF()
    pdf.set_font("Helvetica", size=10)
    for i in range(pages):
        pdf.add_page()
        pdf.multi_cell(0, 5, f"Page {i + 1}. " + SENTENCE * 25)
    return bytes(pdf.output())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    from ragline.ingest import pdf

    data = make_pdf(args.pages)
    times: dict[str, list[float]] = {"pypdfium2": [], "pypdf": []}
    words: dict[str, int] = {}
    for _ in range(args.repeat):
        for name, fn in (("pypdfium2", pdf._with_pdfium), ("pypdf", pdf._with_pypdf)):
            t0 = time.perf_counter()
            out = fn(data, "bench.pdf")
            times[name].append((time.perf_counter() - t0) * 1000)
            words[name] = sum(len(t.split()) for _, t in out.pages)
    fast, slow = statistics.median(times["pypdfium2"]), statistics.median(times["pypdf"])
    print(f"{args.pages} pages, {len(data) / 1e3:.0f} kB, words {words}")
    print("| engine | median (ms) | ms per page |\n|---|---:|---:|")
    for name, med in (("pypdfium2", fast), ("pypdf", slow)):
        print(f"| {name} | {med:.1f} | {med / args.pages:.2f} |")
    print(f"pypdf / pypdfium2 = {slow / fast:.1f}x")


if __name__ == "__main__":
    main()
