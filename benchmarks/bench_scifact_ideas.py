"""SciFact: every idea of issue 36 item 1 measured in numpy, on the shipped vectors.

Reads the SciFact collection that ``ragline eval beir`` loaded (document vectors from
the store, so exactly what the server searches), embeds the 1,109 queries once with the
collection's embedder, and caches both under ``--cache``. BM25 is recomputed in numpy
with Edge's own analyser (``qdrant_edge.Bm25``: word tokens, lower case, English stop
words and Snowball stemming) and the standard formula (k1 1.2, b 0.75, the corpus's
mean length); the store's BM25 and DBSF hybrid are reproduced exactly (the first rows
of each table; BENCHMARKS.md, "SciFact: fusion, feedback, title, sentences").

Each idea is scored on the train split (809 queries, where parameters were chosen) and
the test split (300 queries, the one ``ragline eval beir`` reports):

* fusion and normalisation: DBSF (mean +- 3 sigma, the shipped default), min-max,
  z-score, each with a dense weight; RRF; candidate depth; "full" scores (both legs'
  scores for every candidate of the union, not only for the leg that found it);
* BM25 parameters (k1, b);
* pseudo-relevance feedback: RM3 on the BM25 leg (feedback documents from the fused
  list, expansion terms weighted, or all at the same weight, which is all a text query
  to the store can express) and Rocchio on the dense leg;
* the title field: a separate title-only BM25 as a third signal;
* ``--sentences``: MaxP, a document's dense score as the best of its sentences' (and its
  title's) cosine; embeds ~50,000 sentences, ~40 minutes on a loaded 2-core machine.

    ragline eval beir ../shared/data/beir/scifact --collection scifact --data-dir /tmp/evald
    python benchmarks/bench_scifact_ideas.py --data-dir /tmp/evald --cache /tmp/sf-cache
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytrec_eval
import qdrant_edge as q
import scipy.sparse as sp

NEG = -np.inf
VOCAB = 1 << 17  # rows of the term matrices (SciFact has ~27k terms)
Arr = Any  # numpy arrays (benchmarks are not type-checked)


def build_cache(args: argparse.Namespace) -> None:
    """Document vectors from the store, query vectors from the collection's embedder."""
    from ragline.evaluation import beir as b
    from ragline.facade import Ragline
    from ragline.settings import Settings

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    rl = Ragline(Settings(data_dir=args.data_dir,  # type: ignore[call-arg]
                          store_options={"shard_processes": False})).start()
    try:
        info = rl.services.collections.get(args.collection)
        data = b.load(args.dataset)
        ids = list(data.corpus)
        recs = []
        for s in range(0, len(ids), 500):
            recs += rl.services.store.get(info.shard, rl.tenant, ids[s:s + 500],
                                          with_vectors=True)
        args.cache.mkdir(parents=True, exist_ok=True)
        np.save(args.cache / "doc_vecs.npy", np.asarray([r.embedding for r in recs], np.float32))
        (args.cache / "doc_ids.json").write_text(json.dumps([r.id for r in recs]))
        assert info.embedding_provider
        emb = rl.services.embedders.get(info.embedding_provider, info.embedding_model)
        queries = {str(d["_id"]): d["text"] for d in b._jsonl(args.dataset / "queries.jsonl")}
        np.save(args.cache / "q_vecs.npy",
                np.asarray(emb.embed(list(queries.values()), "query"), np.float32))
        (args.cache / "q_ids.json").write_text(json.dumps(list(queries)))
        if args.sentences and not (args.cache / "sent_vecs.npy").exists():
            sents, owner = sentences(data.corpus, [r.id for r in recs])
            vecs = [np.asarray(emb.embed(sents[s:s + 256], "document"), np.float32)
                    for s in range(0, len(sents), 256)]
            np.save(args.cache / "sent_vecs.npy", np.concatenate(vecs))
            np.save(args.cache / "sent_owner.npy", np.asarray(owner))
    finally:
        rl.close()


def sentences(corpus: dict[str, dict[str, str]], ids: list[str]) -> tuple[list[str], list[int]]:
    """Each document's title and sentences, with the document's index."""
    sents: list[str] = []
    owner: list[int] = []
    for j, did in enumerate(ids):
        d = corpus[did]
        parts = [p for p in re.split(r"(?<=[.!?])\s+(?=[A-Z(\[0-9])", d["text"]) if p.strip()]
        for p in ([d["title"]] if d["title"].strip() else []) + parts:
            sents.append(p)
            owner.append(j)
    return sents, owner


class Lab:
    """The cached corpus, queries and qrels, and the scoring and fusion functions."""

    def __init__(self, dataset: Path, cache: Path) -> None:
        self.corpus = {str(d["_id"]): d for d in map(json.loads, (dataset / "corpus.jsonl")
                                                      .read_text().splitlines()) if d}
        self.queries = {str(d["_id"]): d["text"] for d in map(
            json.loads, (dataset / "queries.jsonl").read_text().splitlines()) if d}
        self.doc_ids: list[str] = json.loads((cache / "doc_ids.json").read_text())
        self.q_ids: list[str] = json.loads((cache / "q_ids.json").read_text())
        self.qpos = {x: i for i, x in enumerate(self.q_ids)}
        self.D = unit(np.load(cache / "doc_vecs.npy"))
        self.Q = unit(np.load(cache / "q_vecs.npy"))
        self.n = len(self.doc_ids)
        self.qrels = {s: qrels(dataset / f"qrels/{s}.tsv") for s in ("train", "test")}
        self.tok = q.Bm25(q.Bm25Config(k=1e9, b=0.0, language="english"))  # raw tf
        self.vocab: dict[int, int] = {}
        self.TF = self._tf([self._text(d) for d in self.doc_ids])
        self.TT = self._tf([self.corpus[d]["title"] for d in self.doc_ids])
        self.DL = np.asarray(self.TF.sum(axis=0)).ravel()
        df = np.asarray((self.TF > 0).sum(axis=1)).ravel()
        self.IDF = np.log(1 + (self.n - df + 0.5) / (df + 0.5))
        self.TFC = self.TF.tocsc()
        self.sent: tuple[Arr, Arr] | None = None
        if (cache / "sent_vecs.npy").exists():
            self.sent = (unit(np.load(cache / "sent_vecs.npy")), np.load(cache / "sent_owner.npy"))

    def _text(self, did: str) -> str:  # as ragline.evaluation.beir ingests it
        d = self.corpus[did]
        return f"{d['title'].strip()}\n{d['text']}" if d["title"].strip() else d["text"]

    def _tf(self, texts: list[str]) -> Any:
        rows, cols, vals = [], [], []
        for j, text in enumerate(texts):
            v = self.tok.embed_document(text) if text.strip() else None
            for t, f in zip(v.indices if v else [], v.values if v else [], strict=True):
                rows.append(self.vocab.setdefault(t, len(self.vocab)))
                cols.append(j)
                vals.append(float(f))
        return sp.csr_matrix((vals, (rows, cols)), shape=(VOCAB, self.n))

    def terms(self, qid: str) -> list[int]:
        toks = dict.fromkeys(self.tok.embed_query(self.queries[qid]).indices)
        return [self.vocab[t] for t in toks if t in self.vocab]

    def qids(self, split: str) -> list[str]:
        return [x for x in self.q_ids if x in self.qrels[split]]

    def bm25(self, qids: list[str], k1: float = 1.2, b: float = 0.75, tf: Any = None,
             weights: dict[str, dict[int, float]] | None = None) -> Arr:
        tf = self.TF if tf is None else tf
        dl = np.asarray(tf.sum(axis=0)).ravel()
        coo = tf.tocoo()
        norm = k1 * (1 - b + b * dl[coo.col] / dl[dl > 0].mean())
        w = sp.csr_matrix((self.IDF[coo.row] * coo.data * (k1 + 1) / (coo.data + norm),
                           (coo.row, coo.col)), shape=tf.shape)
        rows, cols, vals = [], [], []
        for i, qid in enumerate(qids):
            tw = weights[qid] if weights else dict.fromkeys(self.terms(qid), 1.0)
            for t, x in tw.items():
                rows.append(i)
                cols.append(t)
                vals.append(x)
        qm = sp.csr_matrix((vals, (rows, cols)), shape=(len(qids), tf.shape[0]))
        return np.asarray((qm @ w).todense())

    def dense(self, qids: list[str], qv: Arr | None = None) -> Arr:
        return (self.Q[[self.qpos[x] for x in qids]] if qv is None else qv) @ self.D.T

    def maxp(self, qids: list[str]) -> Arr:
        assert self.sent is not None
        sv, owner = self.sent
        order = np.argsort(owner, kind="stable")
        starts = np.searchsorted(owner[order], np.arange(self.n))
        s = (self.Q[[self.qpos[x] for x in qids]] @ sv.T)[:, order]
        return np.maximum.reduceat(s, starts, axis=1)

    def rm3(self, qids: list[str], first: Arr, docs: int, terms: int, orig: float,
            same_weight: bool = False) -> dict[str, dict[int, float]]:
        """RM3 (feedback documents weighted by their fused score) -> query term weights.
        ``same_weight``: every query and expansion term at weight 1 (a plain text query)."""
        out = {}
        for i, qid in enumerate(qids):
            qt = self.terms(qid)
            top = np.argpartition(-first[i], docs)[:docs]
            dw = first[i, top] - first[i, top].min() + 1e-9
            ptd = self.TFC[:, top].multiply(1.0 / np.maximum(self.DL[top], 1)[None, :])
            pr = np.asarray(ptd @ (dw / dw.sum())).ravel()
            exp = [t for t in np.argpartition(-pr, terms)[:terms] if pr[t] > 0]
            if same_weight:
                out[qid] = dict.fromkeys([*qt, *exp], 1.0)
                continue
            z = sum(pr[t] for t in exp) or 1.0
            tw = {t: orig / max(len(qt), 1) for t in qt}
            for t in exp:
                tw[t] = tw.get(t, 0.0) + (1 - orig) * pr[t] / z
            out[qid] = tw
        return out

    def rocchio(self, qids: list[str], first: Arr, docs: int, beta: float) -> Arr:
        qv = self.Q[[self.qpos[x] for x in qids]].copy()
        for i in range(len(qids)):
            top = np.argpartition(-first[i], docs)[:docs]
            qv[i] = qv[i] + beta * self.D[top].mean(0)
        return self.dense(qids, unit(qv))

    def evaluate(self, split: str, s: Arr, qids: list[str]) -> tuple[float, float]:
        runs = {}
        for i, qid in enumerate(qids):
            top = np.argsort(-s[i], kind="stable")[:100]
            runs[qid] = {self.doc_ids[j]: float(100 - r) for r, j in enumerate(top)
                         if np.isfinite(s[i, j])}
        per = pytrec_eval.RelevanceEvaluator(self.qrels[split], {"ndcg_cut.10", "recall.100"}
                                             ).evaluate(runs)
        n = len(qids)
        return (sum(v["ndcg_cut_10"] for v in per.values()) / n,
                sum(v["recall_100"] for v in per.values()) / n)


def unit(x: Arr) -> Arr:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def qrels(path: Path) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for i, line in enumerate(path.read_text().splitlines()):
        p = line.strip().split("\t")
        if i and len(p) >= 3:
            out.setdefault(p[0], {})[p[1]] = int(p[2])
    return out


def cand(s: Arr, k: int, matches: bool = False) -> Arr:
    """Each row's top-k; the rest -inf (not retrieved). ``matches``: a BM25 leg, which
    returns only documents sharing a term with the query (score > 0)."""
    idx = np.argpartition(-s, k, axis=1)[:, :k]
    m = np.zeros_like(s, dtype=bool)
    np.put_along_axis(m, idx, True, axis=1)
    return np.where(m & (s > 0) if matches else m, s, NEG)


def _rowwise(fn: Callable[[Arr], Arr]) -> Callable[[Arr], Arr]:
    def norm(s: Arr) -> Arr:
        out = np.full_like(s, np.nan)
        for i in range(s.shape[0]):
            f = np.isfinite(s[i])
            out[i, f] = fn(s[i, f])
        return out
    return norm


def _dbsf(v: Arr) -> Arr:
    if len(v) < 2:
        return np.full_like(v, 0.5)
    mu, sd = v.mean(), v.std(ddof=1)
    return (v - mu + 3 * sd) / (6 * sd) if sd > 0 else np.full_like(v, 0.5)


def _minmax(v: Arr) -> Arr:
    return (v - v.min()) / (v.max() - v.min()) if v.max() > v.min() else np.full_like(v, 0.5)


def _z(v: Arr) -> Arr:
    return (v - v.mean()) / v.std() if v.std() > 0 else np.zeros_like(v)


NORMS = {"dbsf": _rowwise(_dbsf), "minmax": _rowwise(_minmax), "z": _rowwise(_z)}


def fuse(legs: list[tuple[Arr, float]], norm: str = "dbsf") -> Arr:
    """Weighted sum of normalised legs over the union of their candidates; a leg that did
    not return a document adds 0 (as Qdrant's DBSF)."""
    seen = np.zeros_like(legs[0][0], dtype=bool)
    out = np.zeros_like(legs[0][0])
    for s, w in legs:
        seen |= np.isfinite(s)
        out += w * np.nan_to_num(NORMS[norm](s), nan=0.0)
    return np.where(seen, out, NEG)


def rrf(a: Arr, b: Arr, k: int) -> Arr:
    out = np.zeros_like(a)
    for s in (a, b):
        r = np.argsort(np.argsort(-s, axis=1), axis=1)
        out += np.where(np.isfinite(s), 1 / (k + r), 0)
    return np.where(np.isfinite(a) | np.isfinite(b), out, NEG)


def hybrid(d: Arr, s: Arr, k: int = 100, w: float = 0.5, norm: str = "dbsf") -> Arr:
    return fuse([(cand(d, k), w), (cand(s, k, True), 1 - w)], norm)


def experiments(lab: Lab, qids: list[str]) -> list[tuple[str, Arr]]:
    d, s = lab.dense(qids), lab.bm25(qids)
    base = hybrid(d, s)
    out: list[tuple[str, Arr]] = [("dense (cosine)", d), ("BM25 k1 1.2 b 0.75", s),
                                  ("**hybrid DBSF 0.5/0.5, 100 candidates (shipped)**", base)]
    for norm in ("dbsf", "minmax", "z"):
        for w in (0.3, 0.4, 0.5, 0.6):
            if (norm, w) != ("dbsf", 0.5):
                out.append((f"{norm}, dense weight {w}", hybrid(d, s, w=w, norm=norm)))
    out += [(f"rrf k={k}", rrf(cand(d, 100), cand(s, 100, True), k)) for k in (10, 60)]
    out += [(f"DBSF, {k} candidates", hybrid(d, s, k)) for k in (50, 200)]
    union = np.isfinite(cand(d, 100)) | np.isfinite(cand(s, 100, True))
    out.append(("DBSF, full scores over the union",
                fuse([(np.where(union, d, NEG), 0.5), (np.where(union, s, NEG), 0.5)])))
    for k1, b in ((0.9, 0.4), (1.2, 0.5), (1.5, 0.75), (2.0, 0.75)):
        out.append((f"hybrid, BM25 k1 {k1} b {b}", hybrid(d, lab.bm25(qids, k1, b))))
    for docs, terms, orig in ((3, 10, 0.7), (3, 10, 0.8), (2, 5, 0.8), (5, 20, 0.7),
                              (10, 10, 0.5)):
        s2 = lab.bm25(qids, weights=lab.rm3(qids, base, docs, terms, orig))
        out.append((f"RM3 on BM25 ({docs} docs, {terms} terms, query {orig})", s2))
        out.append((f"hybrid with RM3 BM25 ({docs}/{terms}/{orig})", hybrid(d, s2)))
    for docs, terms in ((2, 5), (3, 10)):
        s2 = lab.bm25(qids, weights=lab.rm3(qids, base, docs, terms, 0, same_weight=True))
        out.append((f"hybrid with RM3 terms at weight 1 ({docs}/{terms}, a text query)",
                    hybrid(d, s2)))
    for docs, beta in ((3, 0.3), (3, 0.5), (5, 0.5), (10, 0.5)):
        d2 = lab.rocchio(qids, base, docs, beta)
        out.append((f"Rocchio dense ({docs} docs, beta {beta})", d2))
        out.append((f"hybrid with Rocchio dense ({docs}/{beta})", hybrid(d2, s)))
    rm3 = lab.bm25(qids, weights=lab.rm3(qids, base, 3, 10, 0.7))
    out.append(("hybrid, Rocchio dense (3/0.5) + RM3 BM25 (3/10/0.7)",
                hybrid(lab.rocchio(qids, base, 3, 0.5), rm3)))
    out.append(("4 legs: dense, BM25, RM3 BM25, Rocchio dense (union, equal weights)",
                fuse([(np.where(union, x, NEG), 1.0)
                      for x in (d, s, rm3, lab.rocchio(qids, base, 3, 0.5))])))
    title = lab.bm25(qids, tf=lab.TT)
    out.append(("title-only BM25", title))
    for w in (0.1, 0.2):
        out.append((f"DBSF + title BM25 leg (weight {w})",
                    fuse([(cand(d, 100), 0.5), (cand(s, 100, True), 0.5),
                          (np.where(union, title, NEG), w)])))
    if lab.sent is not None:
        mp = lab.maxp(qids)
        out.append(("MaxP dense (best sentence or title)", mp))
        out.append(("hybrid, MaxP as the dense leg", hybrid(mp, s)))
        for a in (0.3, 0.5, 0.7):
            out.append((f"hybrid, dense leg {a} cosine + {1 - a:g} MaxP",
                        hybrid(a * d + (1 - a) * mp, s)))
        out.append(("3 legs: dense 0.25, BM25 0.5, MaxP 0.25",
                    fuse([(cand(d, 100), 0.25), (cand(s, 100, True), 0.5), (cand(mp, 100), 0.25)])))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", type=Path, help="a data directory holding the collection "
                    "(needed once, to fill --cache)")
    ap.add_argument("--dataset", type=Path, default=Path("../shared/data/beir/scifact"))
    ap.add_argument("--collection", default="scifact")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/scifact-ideas"))
    ap.add_argument("--sentences", action="store_true", help="also MaxP over sentence "
                    "vectors (embeds ~50k sentences once)")
    ap.add_argument("--json", type=Path, help="write every figure here")
    args = ap.parse_args()
    if not (args.cache / "q_vecs.npy").exists() or (
            args.sentences and not (args.cache / "sent_vecs.npy").exists()):
        if args.data_dir is None:
            ap.error("--data-dir is needed to fill the cache")
        build_cache(args)
    lab = Lab(args.dataset, args.cache)
    table: dict[str, dict[str, tuple[float, float]]] = {}
    for split in ("train", "test"):
        qids = lab.qids(split)
        for name, s in experiments(lab, qids):
            table.setdefault(name, {})[split] = lab.evaluate(split, s, qids)
    print("| idea | train nDCG@10 | train R@100 | test nDCG@10 | test R@100 |")
    print("|---|---:|---:|---:|---:|")
    for name, r in table.items():
        print(f"| {name} | {r['train'][0]:.4f} | {r['train'][1]:.4f} | "
              f"{r['test'][0]:.4f} | {r['test'][1]:.4f} |")
    if args.json:
        args.json.write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
