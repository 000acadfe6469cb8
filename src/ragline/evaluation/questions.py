"""Retrieval quality on your own questions: hit@k, MRR, per-question ranks, diffs.

A team writes the questions its users ask, each with the source(s) that
should answer it, in a JSONL or YAML file (see ``docs/evaluation.md``). Every
question is searched through `rl.search.query_sync`, the same pipeline as
the HTTP API and ``ragline eval beir``, so the numbers describe what users get.
A run's JSON report can be given back as the baseline of a later run, which
then lists the questions that moved; metrics can be checked against
thresholds, so retrieval regressions fail CI.

Two ranks are kept per question: ``rank``, the 1-based position of the first
result from an expected source (what a user sees in the top k), and
``source_rank``, the position among *distinct* sources (results from one
source filling several slots count once), which is what a search that
returns one result per source would give.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from ragline.errors import InvalidInput
from ragline.facade import Ragline, SearchRequest

DEFAULT_KS: tuple[int, ...] = (1, 3, 5)
REPORT_VERSION = 1
_EXPECTED_KEYS = ("expected", "sources", "source", "parent_doc_id", "expected_sources")
_MARKDOWN_SUFFIXES = (".md", ".mdx", ".markdown")


@dataclass(slots=True)
class Question:
    """One question and the sources (paths or ``parent_doc_id`` s) that answer it."""

    id: str
    question: str
    expected: list[str]
    where: dict[str, Any] | None = None


@dataclass(slots=True)
class QuestionResult:
    id: str
    question: str
    expected: list[str]
    rank: int | None
    source_rank: int | None
    top: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Report:
    """What a run measured; :meth:`to_json` is the file ``--baseline`` reads back."""

    metrics: dict[str, float]
    questions: list[QuestionResult]
    config: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"version": REPORT_VERSION, "config": self.config, "metrics": self.metrics,
                "questions": [asdict(q) for q in self.questions]}


# --- loading -----------------------------------------------------------------------------


def _as_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return list(value)
    return []


def _question(raw: Any, index: int, where: str) -> Question:
    if not isinstance(raw, Mapping):
        raise InvalidInput(f"{where}: question {index} must be an object")
    text = raw.get("question", raw.get("query"))
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput(f"{where}: question {index} has no 'question' text")
    expected: list[str] = []
    for key in _EXPECTED_KEYS:
        expected += _as_list(raw.get(key))
    expected = [e.strip() for e in expected if e.strip()]
    if not expected:
        raise InvalidInput(
            f"{where}: question {index} lists no expected source ('expected': path or "
            "parent_doc_id, or a list of them)")
    filt = raw.get("where")
    if filt is not None and not isinstance(filt, dict):
        raise InvalidInput(f"{where}: question {index}: 'where' must be an object")
    qid = raw.get("id")
    return Question(str(qid) if qid is not None else f"q{index}", text.strip(), expected, filt)


def load_questions(path: Path) -> list[Question]:
    """Questions from ``.jsonl`` (one object a line) or ``.yaml``/``.yml``/``.json``.

    YAML and JSON files hold a list of questions, or an object with a
    ``questions`` list. Each question needs ``question`` and ``expected``
    (``sources``, ``source`` and ``parent_doc_id`` are accepted too), and may
    have an ``id`` and a ``where`` filter. Ids must be unique.
    """
    name = path.name
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInput(f"{name}: cannot read ({exc.strerror})") from exc
    raws: list[Any]
    try:
        if path.suffix.lower() == ".jsonl":
            raws = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            data = yaml.safe_load(text)
            if isinstance(data, Mapping):
                data = data.get("questions")
            if not isinstance(data, list):
                raise InvalidInput(f"{name}: expected a list of questions")
            raws = data
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise InvalidInput(f"{name}: not valid {path.suffix.lstrip('.').upper()} "
                           f"({str(exc).splitlines()[0]})") from exc
    questions = [_question(raw, i + 1, name) for i, raw in enumerate(raws)]
    if not questions:
        raise InvalidInput(f"{name}: no questions")
    seen: set[str] = set()
    for q in questions:
        if q.id in seen:
            raise InvalidInput(f"{name}: question id {q.id!r} is used twice")
        seen.add(q.id)
    return questions


# --- matching and scoring ------------------------------------------------------------------


def _strip_suffix(path: str) -> str:
    p = PurePosixPath(path)
    return str(p.with_suffix("")) if p.suffix.lower() in _MARKDOWN_SUFFIXES else path


def matches(expected: str, metadata: Mapping[str, Any]) -> bool:
    """Whether a hit's source is ``expected`` (a source path or ``parent_doc_id``).

    A path may carry a prefix of the ingested root (``docs/module-1/...`` when
    ``docs`` was ingested) and the extension may be left out.
    """
    want = _strip_suffix(expected.strip().removeprefix("./").strip("/"))
    for key in ("parent_doc_id", "source_id", "source_path"):
        have = metadata.get(key)
        if not isinstance(have, str) or not have:
            continue
        have = _strip_suffix(have.strip("/"))
        if want == have or want.endswith("/" + have):
            return True
    return False


def _source_of(metadata: Mapping[str, Any], fallback: str) -> str:
    for key in ("parent_doc_id", "source_id", "source_path"):
        value = metadata.get(key)
        if isinstance(value, str) and value:
            return value
    return fallback


def score(results: Sequence[QuestionResult], ks: Iterable[int] = DEFAULT_KS) -> dict[str, float]:
    """hit@k (share of questions answered in the top k), MRR, and their per-source forms."""
    n = len(results)
    metrics: dict[str, float] = {"questions": n}
    for k in sorted(set(ks)):
        metrics[f"hit@{k}"] = round(sum(r.rank is not None and r.rank <= k for r in results)
                                    / n, 4) if n else 0.0
    metrics["mrr"] = round(sum(1 / r.rank for r in results if r.rank) / n, 4) if n else 0.0
    for k in sorted(set(ks)):
        metrics[f"source_hit@{k}"] = round(
            sum(r.source_rank is not None and r.source_rank <= k for r in results) / n, 4
        ) if n else 0.0
    metrics["source_mrr"] = round(
        sum(1 / r.source_rank for r in results if r.source_rank) / n, 4) if n else 0.0
    metrics["not_found"] = sum(r.rank is None for r in results)
    return metrics


Searcher = Callable[[str, str, str | None, dict[str, Any] | None, int, dict[str, Any]],
                    Sequence[tuple[str, Mapping[str, Any]]]]
"""``(question, collection, mode, where, limit, options) -> [(id, metadata), ...]`` best
first: how a question is searched (in-process, or through a server's client)."""


def facade_searcher(rl: Ragline) -> Searcher:
    """Search through the facade, as the data directory's owner."""
    me = rl.owner()

    def search(question: str, collection: str, mode: str | None,
               where: dict[str, Any] | None, limit: int,
               options: dict[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
        res = rl.search.query_sync(me, SearchRequest(
            collection=collection, query=question, mode=mode,  # type: ignore[arg-type]
            where=where, limit=limit, **options))
        return [(h.id, h.metadata) for h in res.hits]
    return search


def evaluate(rl: Ragline | Searcher, questions: Sequence[Question], collection: str,
             mode: str | None = None, *, ks: Iterable[int] = DEFAULT_KS, depth: int = 50,
             where: dict[str, Any] | None = None,
             options: dict[str, Any] | None = None) -> Report:
    """Search every question in ``collection`` (a ``Ragline``: as the data directory's
    owner; or any :data:`Searcher`) and rank its expected sources. ``options`` are further
    ``SearchRequest`` fields (``mmr``, ``group_by``, ``overviews``...), recorded in the
    report's config."""
    search = facade_searcher(rl) if isinstance(rl, Ragline) else rl
    ks = sorted(set(ks))
    depth = max(depth, *ks)
    results: list[QuestionResult] = []
    for q in questions:
        filters = [f for f in (where, q.where) if f]
        combined = (filters[0] if len(filters) == 1 else {"$and": filters}) if filters else None
        rank = source_rank = None
        sources: list[str] = []
        for position, (hit_id, metadata) in enumerate(
                search(q.question, collection, mode, combined, depth, options or {}),
                start=1):
            source = _source_of(metadata, hit_id)
            if source not in sources:
                sources.append(source)
            if rank is None and any(matches(e, metadata) for e in q.expected):
                rank, source_rank = position, len(sources)
        results.append(QuestionResult(q.id, q.question, q.expected, rank, source_rank,
                                      sources[: max(ks)]))
    config = {"collection": collection, "mode": mode or "auto", "depth": depth, "ks": ks,
              "where": where, **(options or {})}
    return Report(score(results, ks), results, config)


# --- baselines and thresholds ------------------------------------------------------------


@dataclass(slots=True)
class Change:
    id: str
    question: str
    before: int | None
    after: int | None


@dataclass(slots=True)
class Diff:
    """How a run differs from a baseline run's report."""

    metrics: dict[str, tuple[float, float]]
    improved: list[Change]
    regressed: list[Change]
    added: list[str]
    removed: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"metrics": {k: {"before": b, "after": a, "delta": round(a - b, 4)}
                            for k, (b, a) in self.metrics.items()},
                "improved": [asdict(c) for c in self.improved],
                "regressed": [asdict(c) for c in self.regressed],
                "added": self.added, "removed": self.removed}


def load_baseline(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidInput(f"{path.name}: cannot read ({exc.strerror})") from exc
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{path.name}: not a JSON report ({exc.msg})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("questions"), list) or not (
        isinstance(data.get("metrics"), dict)
    ):
        raise InvalidInput(f"{path.name}: not a report of 'ragline eval questions --json'")
    return data


def _worse(before: int | None, after: int | None) -> bool:
    """A rank got worse: further down, or lost (``None`` is below every rank)."""
    if before is None:
        return False
    return after is None or after > before


def diff(report: Report, baseline: Mapping[str, Any]) -> Diff:
    """Compare ``report`` with an earlier report's JSON, question by question (by id)."""
    old_metrics = baseline.get("metrics", {})
    metrics = {k: (float(old_metrics[k]), float(v)) for k, v in report.metrics.items()
               if isinstance(old_metrics.get(k), int | float)}
    before = {str(q.get("id")): q for q in baseline.get("questions", []) if isinstance(q, dict)}
    improved: list[Change] = []
    regressed: list[Change] = []
    for q in report.questions:
        old = before.get(q.id)
        if old is None:
            continue
        old_rank = old.get("rank") if isinstance(old.get("rank"), int) else None
        change = Change(q.id, q.question, old_rank, q.rank)
        if _worse(old_rank, q.rank):
            regressed.append(change)
        elif _worse(q.rank, old_rank):
            improved.append(change)
    current = {q.id for q in report.questions}
    return Diff(metrics, improved, regressed, sorted(current - set(before)),
                sorted(set(before) - current))


def check_thresholds(metrics: Mapping[str, float], minimums: Mapping[str, float]) -> list[str]:
    """One message per metric below its minimum (unknown metrics are an error too)."""
    failures: list[str] = []
    for name, minimum in minimums.items():
        value = metrics.get(name)
        if value is None:
            failures.append(f"{name}: not measured (use --k to compute it)")
        elif value < minimum:
            failures.append(f"{name} = {value:.4f} is below the minimum {minimum:.4f}")
    return failures
