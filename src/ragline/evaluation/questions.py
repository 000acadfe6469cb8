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

Graded relevance (issue 36): a question may grade sources, or sections of them
(``path#Heading > Sub``), 2 = answers it, 1 = useful background, 0 = not useful;
a chunk's grade comes from its source path and ``heading_path``, so grades
survive re-chunking. A file may cap the grade of chunks under some headings
(``section_caps``: a "Try With AI" exercise of the answering lesson is not what
answers it). Then ``rank`` is the first result with the question's top grade,
and ``ndcg@n`` and ``useful@n`` (share of the top ``n`` graded 1 or more) are
reported too. A question with only ``expected`` grades its sources 2.
"""

from __future__ import annotations

import json
import math
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
ANSWERS = 2
"""The grade of a source that answers a question (the one ``expected`` gives)."""


@dataclass(slots=True, frozen=True)
class Judgement:
    """A grade for the chunks of ``source`` (all of them, or those under ``heading``)."""

    source: str
    grade: int
    heading: tuple[str, ...] = ()


@dataclass(slots=True)
class Question:
    """One question and the sources (paths or ``parent_doc_id`` s) that answer it."""

    id: str
    question: str
    expected: list[str]
    where: dict[str, Any] | None = None
    relevant: list[Judgement] = field(default_factory=list)
    caps: dict[str, int] = field(default_factory=dict)
    """Lower-cased heading title -> the most a chunk under it is graded (file-level
    ``section_caps``), unless a judgement names that heading."""

    def judgements(self) -> list[Judgement]:
        return self.relevant or [Judgement(e, ANSWERS) for e in self.expected]

    def top_grade(self) -> int:
        return max((j.grade for j in self.judgements()), default=ANSWERS)

    def grade(self, metadata: Mapping[str, Any]) -> int:
        """The grade of a hit: its most specific matching judgement (a section's over its
        source's), a source-wide one capped by ``caps``; 0 when none matches."""
        path = metadata.get("heading_path")
        headings = tuple(_norm(h) for h in path) if isinstance(path, list) else ()
        # a merged chunk lists every section it covers (``heading_paths``)
        covered = [headings] + [tuple(_norm(h) for h in p.split(" > "))
                                for p in metadata.get("heading_paths") or []
                                if isinstance(p, str)]
        specific: int | None = None
        broad: int | None = None
        for j in self.judgements():
            if not matches(j.source, metadata):
                continue
            if j.heading:
                if any(c[: len(j.heading)] == j.heading for c in covered):
                    specific = max(specific or 0, j.grade)
            else:
                broad = max(broad or 0, j.grade)
        if specific is not None:
            return specific
        if broad is None:
            return 0
        for title in headings:
            for key, cap in self.caps.items():
                if title == key or (title.startswith(key) and title[len(key)] in " :("):
                    broad = min(broad, cap)
        return broad


def _norm(title: Any) -> str:
    return " ".join(str(title).split()).lower()


@dataclass(slots=True)
class QuestionResult:
    id: str
    question: str
    expected: list[str]
    rank: int | None
    source_rank: int | None
    top: list[str] = field(default_factory=list)
    grades: list[int] = field(default_factory=list)
    """The grades of the first results (as many as the largest cut-off)."""
    ndcg: float | None = None


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


def _grade(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 3:
        raise InvalidInput(f"{what}: a grade is a whole number from 0 to 3, got {value!r}")
    return value


def _judgements(raw: Any, what: str) -> list[Judgement]:
    """``relevant``: ``{"path[#Heading > Sub]": grade, ...}``."""
    if raw is None:
        return []
    if not isinstance(raw, Mapping) or not raw:
        raise InvalidInput(f"{what}: 'relevant' must map 'path' or 'path#Heading > Sub' to "
                           "a grade (2 answers it, 1 useful background, 0 not useful)")
    out: list[Judgement] = []
    for key, grade in raw.items():
        source, _, heading = str(key).partition("#")
        if not source.strip():
            raise InvalidInput(f"{what}: 'relevant' key {key!r} names no source")
        titles = tuple(_norm(h) for h in heading.split(">") if h.strip())
        out.append(Judgement(source.strip(), _grade(grade, what), titles))
    return out


def _question(raw: Any, index: int, where: str, caps: dict[str, int] | None = None) -> Question:
    if not isinstance(raw, Mapping):
        raise InvalidInput(f"{where}: question {index} must be an object")
    text = raw.get("question", raw.get("query"))
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput(f"{where}: question {index} has no 'question' text")
    expected: list[str] = []
    for key in _EXPECTED_KEYS:
        expected += _as_list(raw.get(key))
    expected = [e.strip() for e in expected if e.strip()]
    relevant = _judgements(raw.get("relevant"), f"{where}: question {index}")
    if not expected and relevant:  # the sources with the top grade
        top = max(j.grade for j in relevant)
        expected = list(dict.fromkeys(j.source for j in relevant if j.grade == top))
    if not expected or (relevant and max(j.grade for j in relevant) < 1):
        raise InvalidInput(
            f"{where}: question {index} lists no expected source ('expected': path or "
            "parent_doc_id, or a list of them; or 'relevant' with a grade of 1 or more)")
    filt = raw.get("where")
    if filt is not None and not isinstance(filt, dict):
        raise InvalidInput(f"{where}: question {index}: 'where' must be an object")
    qid = raw.get("id")
    return Question(str(qid) if qid is not None else f"q{index}", text.strip(), expected, filt,
                    relevant, dict(caps or {}))


def _caps(raw: Any, where: str) -> dict[str, int]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InvalidInput(f"{where}: 'section_caps' must map heading titles to grades")
    return {_norm(k): _grade(v, f"{where}: section_caps") for k, v in raw.items()}


def load_questions(path: Path) -> list[Question]:
    """Questions from ``.jsonl`` (one object a line) or ``.yaml``/``.yml``/``.json``.

    YAML and JSON files hold a list of questions, or an object with a
    ``questions`` list (and then ``section_caps``). Each question needs
    ``question`` and ``expected`` (``sources``, ``source`` and ``parent_doc_id``
    are accepted too) or ``relevant`` (graded sources and sections), and may
    have an ``id`` and a ``where`` filter. Ids must be unique.
    """
    name = path.name
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInput(f"{name}: cannot read ({exc.strerror})") from exc
    raws: list[Any]
    caps: dict[str, int] = {}
    try:
        if path.suffix.lower() == ".jsonl":
            raws = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            data = yaml.safe_load(text)
            if isinstance(data, Mapping):
                caps = _caps(data.get("section_caps"), name)
                data = data.get("questions")
            if not isinstance(data, list):
                raise InvalidInput(f"{name}: expected a list of questions")
            raws = data
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise InvalidInput(f"{name}: not valid {path.suffix.lstrip('.').upper()} "
                           f"({str(exc).splitlines()[0]})") from exc
    questions = [_question(raw, i + 1, name, caps) for i, raw in enumerate(raws)]
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


def ndcg(grades: Sequence[int], judged: Iterable[int], n: int) -> float:
    """nDCG@n with linear gains (``grade / log2(position + 1)``, as trec_eval); the ideal
    ranking sorts ``judged`` (every grade found, plus one top grade not found)."""
    def dcg(gs: Sequence[int]) -> float:
        return sum(g / math.log2(i + 2) for i, g in enumerate(gs[:n]))

    ideal = dcg(sorted(judged, reverse=True))
    return dcg(grades) / ideal if ideal > 0 else 0.0


def score(results: Sequence[QuestionResult], ks: Iterable[int] = DEFAULT_KS) -> dict[str, float]:
    """hit@k (share of questions answered in the top k), MRR, and their per-source forms;
    with graded results also nDCG@n and useful@n (n = the largest k)."""
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
    graded = [r for r in results if r.ndcg is not None]
    if graded:
        cut = max(ks)
        metrics[f"ndcg@{cut}"] = round(sum(r.ndcg or 0.0 for r in graded) / len(graded), 4)
        metrics[f"useful@{cut}"] = round(
            sum(sum(g >= 1 for g in r.grades[:cut]) for r in graded) / (cut * len(graded)), 4)
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
        grades: list[int] = []
        top = q.top_grade()
        for position, (hit_id, metadata) in enumerate(
                search(q.question, collection, mode, combined, depth, options or {}),
                start=1):
            source = _source_of(metadata, hit_id)
            if source not in sources:
                sources.append(source)
            grades.append(q.grade(metadata))
            if rank is None and grades[-1] >= top:
                rank, source_rank = position, len(sources)
        judged = [g for g in grades if g > 0] + ([] if rank is not None else [top])
        results.append(QuestionResult(q.id, q.question, q.expected, rank, source_rank,
                                      sources[: max(ks)], grades[: max(ks)],
                                      round(ndcg(grades, judged, max(ks)), 4)))
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
