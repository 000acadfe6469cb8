"""Retrieval quality, before and after each issue-12 change, in one run.

Book (``ragline eval questions``): the real book ingested three times — contextual
chunk headers ``off`` (the old default), ``embed`` and ``text`` — and each searched
in every mode with the overview prior off (``keep``, the old behaviour) and on
(``yield``), plus MMR and ``group_by`` on top of the new default.

SciFact (``ragline eval beir``): the corpus ingested once (its documents are added
whole, title first, so chunk headers do not apply), then the old default, the new
default and MMR / group_by / dense for comparison. Nothing from the data sets is
written into the repository: data directories go under ``--work``.

    .venv/bin/python benchmarks/bench_quality.py --work /tmp/quality \\
        --book /work/shared/data/markdown-book/docs \\
        --scifact /work/shared/data/beir/scifact --json quality.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from ragline.evaluation import beir as b
from ragline.evaluation import questions as ev
from ragline.facade import Ragline
from ragline.settings import Settings

HEADERS = ("off", "embed", "text")
MODES = ("hybrid", "dense", "sparse")


def book(args: argparse.Namespace) -> list[dict[str, Any]]:
    qs = ev.load_questions(args.questions)
    rows: list[dict[str, Any]] = []
    for header in HEADERS:
        settings = Settings(data_dir=args.work / f"book-{header}",  # type: ignore[call-arg]
                            ingest_context_header=header)
        rl = Ragline(settings).start()
        try:
            t0 = time.perf_counter()
            rl.services.ingest.run_directory("book", "default", args.book)
            took = time.perf_counter() - t0
            runs: list[tuple[str, str, dict[str, Any]]] = [
                (mode, ov, {"overviews": ov}) for mode in MODES for ov in ("keep", "yield")]
            runs += [("hybrid", "yield+mmr0.7", {"overviews": "yield", "mmr": 0.7}),
                     ("hybrid", "yield+group_by", {"overviews": "yield", "group_by": "source"})]
            for mode, label, options in runs:
                report = ev.evaluate(rl, qs, "book", mode, options=options)
                m = report.metrics
                rows.append({"set": "book", "header": header, "mode": mode, "shaping": label,
                             "hit@1": m["hit@1"], "hit@3": m["hit@3"], "hit@5": m["hit@5"],
                             "mrr": m["mrr"], "ingest_s": round(took, 1)})
                print(json.dumps(rows[-1]), flush=True)
        finally:
            rl.close()
    return rows


def scifact(args: argparse.Namespace) -> list[dict[str, Any]]:
    data = b.load(args.scifact)
    rl = Ragline(Settings(data_dir=args.work / "scifact")).start()  # type: ignore[call-arg]
    rows: list[dict[str, Any]] = []
    try:
        t0 = time.perf_counter()
        b.ingest(rl, data, "scifact", "local")
        took = time.perf_counter() - t0
        runs: list[tuple[str, str, dict[str, Any]]] = [
            ("hybrid", "keep (old default)", {"overviews": "keep"}),
            ("hybrid", "yield (new default)", {"overviews": "yield"}),
            ("hybrid", "yield+mmr0.7", {"overviews": "yield", "mmr": 0.7}),
            ("hybrid", "yield+group_by", {"overviews": "yield", "group_by": "source"}),
            ("dense", "yield", {"overviews": "yield"}),
        ]
        for mode, label, options in runs:
            t1 = time.perf_counter()
            m = b.score(data, b.run(rl, data, "scifact", mode, options=options))
            rows.append({"set": "scifact", "mode": mode, "shaping": label,
                         "ndcg@10": m["ndcg@10"], "recall@100": m["recall@100"],
                         "mrr@10": m["mrr@10"], "queries_s": round(time.perf_counter() - t1, 1),
                         "ingest_s": round(took, 1)})
            print(json.dumps(rows[-1]), flush=True)
    finally:
        rl.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True, help="Data directories go here.")
    ap.add_argument("--book", type=Path, help="The book's docs/ folder.")
    ap.add_argument("--questions", type=Path,
                    default=Path(__file__).with_name("book_questions.yaml"))
    ap.add_argument("--scifact", type=Path, help="The BEIR SciFact folder.")
    ap.add_argument("--json", type=Path, help="Write every row here.")
    args = ap.parse_args()
    rows: list[dict[str, Any]] = []
    if args.book:
        rows += book(args)
    if args.scifact:
        rows += scifact(args)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
