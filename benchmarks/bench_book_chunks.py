"""How the chunker cuts a Markdown book (issue 36): chunks, chunks under 100 tokens
(spec 004 EC-4), and chunks that end on a heading or caption whose code block opens the
next chunk of the same source.

Counts tokens with the local embedder's tokenizer (all-MiniLM-L6-v2) at the size ingestion
uses with contextual headers (254 - 32 = 222 word pieces, overlap 0.15). No embedding, no
data directory: only the chunker.

    python benchmarks/bench_book_chunks.py /work/shared/data/markdown-book/docs [--list]
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

from ragline.ingest import chunk_document, discover, load_file
from ragline.providers.embedders.local_onnx import LocalOnnxEmbedder


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", type=Path)
    ap.add_argument("--size", type=int, default=222)
    ap.add_argument("--overlap", type=float, default=0.15)
    ap.add_argument("--list", action="store_true", help="name each caption left at a chunk end")
    args = ap.parse_args()
    embedder = LocalOnnxEmbedder()
    overhead = embedder.count_tokens("")

    def count(text: str) -> int:
        return max(0, embedder.count_tokens(text) - overhead)

    total = small = dangling = 0
    for path in discover(args.root):
        doc = load_file(path, args.root)
        chunks = chunk_document(doc, count, args.size, args.overlap)
        total += len(chunks)
        small += sum(c.token_count < 100 for c in chunks)
        for a, b in itertools.pairwise(chunks):
            if b.text.lstrip().startswith(("```", "~~~")) and not a.text.rstrip().endswith(
                    ("```", "~~~")):
                dangling += 1
                if args.list:
                    print(f"  {doc.source_path}: ...{a.text.rstrip()[-60:]!r}")
    print(f"chunks {total}, under 100 tokens {small} ({small / total:.1%}), "
          f"ending before the code that opens the next {dangling}")


if __name__ == "__main__":
    main()
