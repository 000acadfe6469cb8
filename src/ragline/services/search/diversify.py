"""Result-list shaping after ranking: the overview prior, distinct sources, MMR.

Pure functions of a ranked list (no I/O), applied by
:class:`~ragline.services.search.retrieval.RetrievalService` above the store, so every
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
* :class:`Diversity` — on by default (issue 36): every window of ``window`` results
  (the first page, then the next) holds at most ``asides`` *aside* chunks (default
  none while other hits remain) — a section such as "Try With AI", "Exercises",
  "Checkpoint" or "Learning Objectives", or an overview page that summarises another
  hit's page — and, when set, at most ``per_source`` chunks of one source ("host
  crowding" of web search), so that the exercises and overviews around a lesson do
  not crowd out the lessons that answer. A hit over a quota waits for the next
  window; nothing is dropped. An overview page ranked first is what the query asks
  for: its chunks are no asides. Measured on the book's judged questions
  (BENCHMARKS.md, issue 36).
* :func:`mmr` — maximal marginal relevance (Carbonell & Goldstein, 1998): pick
  greedily the hit maximising ``λ·relevance - (1-λ)·max cosine to the hits
  already picked``, relevance being the rank score min-max normalised over the
  candidates (so the same λ works for cosine, BM25, fused and reranked scores) and
  made non-increasing down the list (a hit moved down without a new score, like an
  overview that yielded, does not climb back).
"""

from __future__ import annotations

import posixpath
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ragline.core.types import ScoredRecord
from ragline.settings import ASIDE_SECTIONS

OVERVIEW_STEMS = frozenset({"readme", "index", "_index", "overview"})
"""File names (without extension, any case) of pages that summarise their folder."""
OVERVIEW_KEY = "overview"
"""Metadata key (e.g. from frontmatter) that says yes or no explicitly."""
SOURCE = "source"
"""``group_by`` value meaning the document a chunk came from."""
ASIDE_KEY = "aside"
"""Metadata key (e.g. from frontmatter) that marks a chunk as an aside, or not, explicitly."""


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


def _title(text: object) -> str:
    return " ".join(str(text).split()).lower()


@dataclass(slots=True)
class Diversity:
    """Quotas per window of results (see the module docstring). ``per_source`` 0 puts no
    limit on one source; ``asides`` 0 keeps asides out of a window while other hits remain;
    quotas that cannot bind (``window`` or more) turn the stage off."""

    per_source: int = 0
    asides: int = 0
    window: int = 5
    aside_sections: Sequence[str] = ASIDE_SECTIONS
    _titles: tuple[str, ...] = field(init=False, default=())

    def __post_init__(self) -> None:
        self._titles = tuple(_title(t) for t in self.aside_sections if str(t).strip())

    @property
    def enabled(self) -> bool:
        return 0 < self.per_source < self.window or self.asides < self.window

    def is_aside(self, metadata: Mapping[str, Any], overviews: bool = True,
                 summarised: Sequence[Mapping[str, Any]] = ()) -> bool:
        """A chunk under an aside section, or an overview page (when ``overviews``) that
        summarises one of the ``summarised`` hits' pages (an overview of a folder with
        nothing else among the results *is* the answer); ``metadata.aside`` (true/false)
        wins."""
        flag = metadata.get(ASIDE_KEY)
        if isinstance(flag, bool):
            return flag
        folder = overview_folder(metadata) if overviews else None
        if folder is not None and any(_summarised_by(m, folder) for m in summarised):
            return True
        path = metadata.get("heading_path")
        if not isinstance(path, list):
            return False
        for heading in path:
            title = _title(heading)
            for t in self._titles:
                if title == t or (title.startswith(t) and title[len(t)] in " :(-"):
                    return True
        return False

    def apply(self, hits: Sequence[ScoredRecord], overviews: bool = True,
              limit: int | None = None) -> list[ScoredRecord]:
        """``hits`` (best first) re-ordered window by window: each window takes the best
        remaining hits within the quotas, then fills any free places in rank order. Past
        ``limit`` results the rest keep their order."""
        if not self.enabled or len(hits) <= 1:
            return list(hits)
        rest = list(hits)
        metas = [h.metadata for h in rest]
        aside = {id(h): self.is_aside(h.metadata, overviews, metas) for h in rest}
        # the best hit is an overview page: the query asks for it; its chunks are no asides
        if aside[id(rest[0])] and overview_folder(rest[0].metadata) is not None:
            first = group_key(rest[0], SOURCE)
            aside = {id(h): aside[id(h)] and group_key(h, SOURCE) != first for h in rest}
        out: list[ScoredRecord] = []
        while rest and (limit is None or len(out) < limit):
            page: list[ScoredRecord] = []
            waiting: list[ScoredRecord] = []
            sources: Counter[str] = Counter()
            asides = 0
            for h in rest:
                if len(page) >= self.window:
                    waiting.append(h)
                    continue
                src = group_key(h, SOURCE)
                if (0 < self.per_source <= sources[src]
                        or (aside[id(h)] and asides >= self.asides)):
                    waiting.append(h)
                    continue
                page.append(h)
                sources[src] += 1
                asides += aside[id(h)]
            while len(page) < self.window and waiting:  # too few hits within the quotas
                page.append(waiting.pop(0))
            out.extend(page)
            rest = waiting
        return out + rest


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
