"""Hybrid fusion sweep on a BEIR collection already loaded by ``ragline eval beir``.

Runs RRF with several k and DBSF, at two candidate depths, on the chosen qrels split,
through Edge's fusion query (the same one ``hybrid_search`` sends). Used to pick the
defaults on SciFact's *train* split, then confirmed on test.

    python benchmarks/bench_fusion_sweep.py --data-dir /tmp/evald --split train
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import qdrant_edge as q
from edge_here import edge_here

from ragline.evaluation import beir as b
from ragline.facade import Ragline
from ragline.providers.stores.qdrant_edge.translate import tenant_filter
from ragline.settings import Settings


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--dataset", default="../shared/data/beir/scifact")
    ap.add_argument("--collection", default="scifact")
    ap.add_argument("--split", default="train")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    rl = Ragline(Settings(data_dir=Path(args.data_dir))).start()
    data = b.load(Path(args.dataset), split=args.split)
    info = rl.services.collections.get(args.collection)
    assert info.embedding_provider
    emb = rl.services.embedders.get(info.embedding_provider, info.embedding_model)
    vecs = {qid: emb.embed([t], "query")[0].tolist() for qid, t in data.queries.items()}
    # the sweep times raw Edge calls: on a copy of the shard opened in this process
    shard: Any = edge_here(rl.services.store, info.shard).shard  # type: ignore[arg-type]
    flt = tenant_filter(rl.tenant, None)

    def run(fusion: Any, depth: int) -> dict[str, float]:
        runs = {}
        for qid, text in data.queries.items():
            pts = shard.query(q.QueryRequest(limit=100, query=fusion, with_payload=True,
                prefetches=[
                    q.Prefetch(limit=depth, filter=flt,
                               query=q.Query.Nearest(vecs[qid], using="dense")),
                    q.Prefetch(limit=depth, filter=flt, query=q.TextQuery("text", text))]))
            runs[qid] = {p.payload["doc_id"]: float(p.score) for p in pts}
        return b.score(data, runs)

    print(f"| fusion | candidates | nDCG@10 | Recall@100 | MRR@10 | split ({args.split}) |")
    print("|---|---|---|---|---|---|")
    configs: list[tuple[str, Any]] = [(f"rrf k={k}", q.Fusion.Rrf(k=k)) for k in (10, 20, 60)]
    configs.append(("dbsf", q.Fusion.Dbsf()))
    for name, fusion in configs:
        for depth in (100, 200):
            m = run(fusion, depth)
            print(f"| {name} | {depth} | {m['ndcg@10']:.4f} | {m['recall@100']:.4f} | "
                  f"{m['mrr@10']:.4f} | {m['queries']} queries |", flush=True)
    rl.close()


if __name__ == "__main__":
    main()
