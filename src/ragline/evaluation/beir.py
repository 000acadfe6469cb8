"""BEIR datasets: load, ingest into a collection, run every test query, score.

Loading and searching go through a :class:`Backend`: ``ragline.client.Client`` for a
running server, or the CLI's in-process adapter of the ``Ragline`` facade (queries
through `rl.search.query_sync`, the same pipeline as the HTTP API), so the
figures describe what users get. Metrics come from pytrec_eval (the trec_eval
implementation), not from our own code.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ragline.client import models as m
from ragline.errors import CollectionNotFound, InvalidInput

Progress = Callable[[int, int], None]


class Backend(Protocol):
    """What loading and running a dataset needs: a subset of ``ragline.client.Client``."""

    def get_collection(self, name: str, /) -> m.Collection: ...

    def create_collection(self, name: str, metadata: Mapping[str, Any] | None = None, /, *,
                          embed_provider: str | None = None) -> m.Collection: ...

    def empty_collection(self, name: str, /) -> m.DocumentsDeleted: ...

    def add_documents(self, name: str, documents: Sequence[Mapping[str, Any]],
                      /) -> m.DocumentsAdded: ...

    def search(self, collection: str | None = None, query: str | None = None, /, *,
               limit: int = 10, mode: str | None = None, **options: Any) -> m.SearchResult: ...


@dataclass
class BeirData:
    corpus: dict[str, dict[str, str]]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def load(path: Path, split: str = "test") -> BeirData:
    for name in ("corpus.jsonl", "queries.jsonl", f"qrels/{split}.tsv"):
        if not (path / name).exists():
            raise InvalidInput(f"Not a BEIR dataset: {path / name} is missing")
    corpus = {str(d["_id"]): {"title": d.get("title", ""), "text": d.get("text", "")}
              for d in _jsonl(path / "corpus.jsonl")}
    queries = {str(d["_id"]): d["text"] for d in _jsonl(path / "queries.jsonl")}
    qrels: dict[str, dict[str, int]] = {}
    # newline="" keeps "\r" visible so CRLF files are handled by strip(), not by luck
    with (path / f"qrels/{split}.tsv").open(encoding="utf-8", newline="") as f:
        for i, line in enumerate(f):
            parts = line.strip().split("\t")
            if (i == 0 and parts[0] == "query-id") or len(parts) < 3:
                continue
            qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    queries = {q: t for q, t in queries.items() if q in qrels}
    return BeirData(corpus, queries, qrels)


def ingest(rl: Backend, data: BeirData, collection: str, provider: str,
           progress: Progress | None = None, batch: int = 128) -> bool:
    """Load the corpus unless the collection already holds it; True if it ingested."""
    try:
        existing = rl.get_collection(collection)
    except CollectionNotFound:
        rl.create_collection(collection, {"source": "beir"}, embed_provider=provider)
    else:
        if existing.count == len(data.corpus):
            return False
        rl.empty_collection(collection)
    ids = list(data.corpus)
    for start in range(0, len(ids), batch):
        chunk = ids[start:start + batch]
        rl.add_documents(collection, [{"id": i, "text": _doc_text(data.corpus[i]),
                                       "metadata": {"beir_id": i}} for i in chunk])
        if progress:
            progress(min(start + batch, len(ids)), len(ids))
    return True


def _doc_text(doc: dict[str, str]) -> str:
    title = doc.get("title", "").strip()
    return f"{title}\n{doc.get('text', '')}" if title else doc.get("text", "")


def run(rl: Backend, data: BeirData, collection: str, mode: str | None,
        depth: int = 100, options: dict[str, Any] | None = None) -> dict[str, dict[str, float]]:
    """Every query's top ``depth`` as a run for trec_eval. Scored by rank (``depth -
    position``), so that stages which reorder without rescoring (the overview prior,
    MMR, grouping) are scored in the order users see."""
    runs: dict[str, dict[str, float]] = {}
    for qid, text in data.queries.items():
        res = rl.search(collection, text, limit=depth, mode=mode, **(options or {}))
        runs[qid] = {h.id: float(depth - i) for i, h in enumerate(res.results)}
    return runs


def score(data: BeirData, runs: dict[str, dict[str, float]]) -> dict[str, float]:
    try:
        import pytrec_eval
    except ImportError as exc:  # an install without the [eval] extra
        raise InvalidInput("evaluation needs trec_eval: pip install 'ragline[eval]'") from exc

    ev = pytrec_eval.RelevanceEvaluator(data.qrels, {"ndcg_cut.10", "recall.100"})
    top10 = {q: dict(sorted(r.items(), key=lambda kv: -kv[1])[:10]) for q, r in runs.items()}
    mrr = pytrec_eval.RelevanceEvaluator(data.qrels, {"recip_rank"}).evaluate(top10)
    per_q = ev.evaluate(runs)
    n = len(data.queries)

    def mean(values: dict[str, dict[str, float]], key: str) -> float:
        return sum(v[key] for v in values.values()) / n if n else 0.0

    return {"ndcg@10": round(mean(per_q, "ndcg_cut_10"), 4),
            "recall@100": round(mean(per_q, "recall_100"), 4),
            "mrr@10": round(mean(mrr, "recip_rank"), 4), "queries": n}
