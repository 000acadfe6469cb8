"""Result-list shaping after ranking: the overview prior, distinct sources, MMR.

Pure functions of a ranked list (no I/O), applied by
:class:`~ragline.services.retrieval.RetrievalService` above the store, so every
store gets them and the store protocol stays small. Each takes hits best first
and returns hits best first.

* :func:`overviews_yield` — an overview page (``README``/``index``) that ranks
  above a page it summarises (a page under its folder) yields to it: it moves
  just below the best such page, when that page is among the first ``window``
  hits. Measured on the book questions (BENCHMARKS.md): chapter READMEs were on
  top for 14 of the 19 questions hybrid missed at rank 1.
* :func:`group` — at most ``size`` hits per group (``"source"``: the document a
  chunk came from); the best hit of each group is the result, the others ride
  along with it.
* :func:`mmr` — maximal marginal relevance (Carbonell & Goldstein, 1998): pick
  greedily the hit maximising ``λ·relevance - (1-λ)·max cosine to the hits
  already picked``, relevance being the rank score min-max normalised over the
  candidates (so the same λ works for cosine, BM25, fused and reranked scores) and
  made non-increasing down the list (a hit moved down without a new score, like an
  overview that yielded, does not climb back).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ragline.core.types import ScoredRecord

OVERVIEW_STEMS = frozenset({"readme", "index", "_index", "overview"})
"""File names (without extension, any case) of pages that summarise their folder."""
OVERVIEW_KEY = "overview"
"""Metadata key (e.g. from frontmatter) that says yes or no explicitly."""
SOURCE = "source"
"""``group_by`` value meaning the document a chunk came from."""


def overview_folder(metadata: Mapping[str, Any]) -> str | None:
    """The folder an overview page summarises ("" for the root), or None if the hit is
    not from an overview page. ``metadata.overview`` (true/false) wins over the name."""
    path = metadata.get("source_path")
    if not isinstance(path, str) or not path or path.startswith(("http://", "https://")):
        return None
    folder, name = posixpath.split(path.replace("\\", "/").strip("/"))
    flag = metadata.get(OVERVIEW_KEY)
    if isinstance(flag, bool):
        return folder if flag else None
    return folder if name.rsplit(".", 1)[0].lower() in OVERVIEW_STEMS else None


def _summarised_by(metadata: Mapping[str, Any], folder: str) -> bool:
    path = metadata.get("source_path")
    if not isinstance(path, str) or overview_folder(metadata) is not None:
        return False
    path = path.replace("\\", "/").strip("/")
    return folder == "" or path.startswith(folder + "/")


def overviews_yield(hits: Sequence[ScoredRecord], window: int) -> list[ScoredRecord]:
    """Move each overview hit just below the best hit it summarises, when that hit is
    among the first ``window``; other hits keep their order. Scores are untouched here;
    retrieval then lowers a moved hit's score to the one above it (the list is in score
    order, issue 33)."""
    firsts: dict[int, list[ScoredRecord]] = {}
    moved: set[int] = set()
    head = hits[:window]
    for i, hit in enumerate(hits):
        folder = overview_folder(hit.metadata)
        if folder is None:
            continue
        below = next((j for j, h in enumerate(head) if j > i
                      and _summarised_by(h.metadata, folder)), None)
        if below is not None:
            firsts.setdefault(below, []).append(hit)
            moved.add(i)
    if not moved:
        return list(hits)
    out: list[ScoredRecord] = []
    for j, hit in enumerate(hits):
        if j not in moved:
            out.append(hit)
        out.extend(firsts.get(j, []))
    return out


def group_key(hit: ScoredRecord, by: str) -> str:
    """The group of a hit: its source document for ``"source"``, else the value of the
    metadata field ``by`` (a hit without it is a group of its own)."""
    if by == SOURCE:
        for key in ("parent_doc_id", "source_id", "source_path"):
            value = hit.metadata.get(key)
            if isinstance(value, str) and value:
                return value
        return hit.id
    value = hit.metadata.get(by)
    if value is None or isinstance(value, list | dict):
        return f"\x00{hit.id}"  # not a value anyone can send: a group of one
    return str(value)


@dataclass(slots=True)
class Group:
    key: str
    hits: list[ScoredRecord] = field(default_factory=list)


def group(hits: Sequence[ScoredRecord], by: str, size: int, limit: int) -> list[Group]:
    """The first ``limit`` groups in order of their best hit, each with at most ``size``
    hits (best first)."""
    groups: dict[str, Group] = {}
    for hit in hits:
        key = group_key(hit, by)
        g = groups.get(key)
        if g is None:
            if len(groups) >= limit:
                continue
            g = groups[key] = Group(key)
        if len(g.hits) < size:
            g.hits.append(hit)
    return list(groups.values())


def mmr(hits: Sequence[ScoredRecord], vectors: np.ndarray, lam: float,
        limit: int) -> list[ScoredRecord]:
    """Maximal marginal relevance over ``hits`` (ranked) with their ``vectors`` (one row
    each). ``lam`` = 1 keeps the ranking; 0 picks only for novelty after the first."""
    n = len(hits)
    if n == 0 or limit <= 0:
        return []
    scores = np.asarray([h.score for h in hits], dtype=np.float64)
    span = float(scores.max() - scores.min())
    rel = (scores - scores.min()) / span if span > 0 else np.ones(n)
    # non-increasing down the list: a stage that moved a hit without rescoring it
    # (the overview prior) keeps its say
    rel = np.minimum.accumulate(rel)
    v = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    v = (v / np.where(norms > 0, norms, 1.0)).astype(np.float32)
    picked: list[int] = []
    closest = np.full(n, -np.inf)  # max similarity to the picked ones
    free = np.ones(n, dtype=bool)
    while len(picked) < min(limit, n):
        penalty = np.where(np.isfinite(closest), closest, 0.0)
        value = lam * rel - (1.0 - lam) * penalty
        value[~free] = -np.inf
        best = int(np.argmax(value))  # first maximum: ties keep the ranking's order
        picked.append(best)
        free[best] = False
        # one row of similarities per pick (limit x n), not the whole n x n matrix
        closest = np.maximum(closest, (v @ v[best]).astype(np.float64))
    return [hits[i] for i in picked]
