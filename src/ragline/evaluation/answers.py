"""Answer quality on your own questions: a reproducible rubric over ``/api/chat`` answers.

A team writes, for each question, the *facts* a right answer states (keyword groups in its
own words, matched leniently), and adds questions the knowledge base cannot answer. Every
question goes through the chat flow (``POST /api/chat`` of a server, or the same turn in
this process); each answer is scored by four checks that need no judge model, so two runs
on the same answers give the same verdicts:

* **correct** (in-scope questions): every fact is stated, and the answer does not repeat
  the question as its prompt labelled it (**echoed**: ``Question: ...``; a model that
  continues its prompt instead of answering copies the question and the documents, facts
  and all). A fact is a string of words
  that must all appear in the answer, in any order, case-insensitive and with common
  suffixes ignored (``publishes`` states ``publisher``'s stem ``publish``); ``|`` separates
  alternatives (``"colcon build|colcon"``: either wording). ``need`` (optional) lowers the
  number of facts required;
* **cited**: the answer's ``sources`` include an expected source (the same path matching
  as ``ragline eval questions``);
* **invented**: commands and identifiers of the answer (code spans and blocks, dotted or
  snake_case names, ``--options``, CamelCase words, ``name(`` calls) that appear in none of
  the retrieved documents (the answer's sources: their text, title, path and URL, what the
  prompt showed) nor in the question. An answer without
  sources (the ``general`` path) has nothing to draw commands from, so each such term
  counts;
* **refused correctly** (out-of-scope questions, ``out_of_scope: true``): the answer did
  not use the knowledge base (path ``general``) or says that the context does not hold
  the answer.

The answer key (YAML or JSON) is a list, or ``{questions_file: PATH, questions: [...]}``:
``questions_file`` (relative to the key) is a ``ragline eval questions`` file whose
``question`` and ``expected`` fill the entries of the same ``id``, so the two files do not
repeat each other.
"""

from __future__ import annotations

import json
import keyword
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ragline.errors import InvalidInput
from ragline.evaluation.questions import load_questions, matches

REPORT_VERSION = 1

# --- the answer key ------------------------------------------------------------------------


@dataclass(slots=True)
class AnswerCase:
    """One question, the sources that answer it and the facts a right answer states."""

    id: str
    question: str
    expected: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)
    need: int | None = None
    out_of_scope: bool = False

    @property
    def required(self) -> int:
        return len(self.facts) if self.need is None else min(self.need, len(self.facts))


def _strings(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise InvalidInput(f"{what} must be a string or a list of non-empty strings")
    return [v.strip() for v in value]


def _case(raw: Any, index: int, name: str, known: Mapping[str, Any]) -> AnswerCase:
    if not isinstance(raw, Mapping):
        raise InvalidInput(f"{name}: entry {index} must be an object")
    qid = str(raw.get("id") or f"a{index}")
    base = known.get(qid)
    where = f"{name}: {qid}"
    text = raw.get("question") or (base.question if base else None)
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput(f"{where} has no 'question' (and no question of that id in "
                           "questions_file)")
    out = bool(raw.get("out_of_scope", False))
    expected = _strings(raw.get("expected"), f"{where}: 'expected'") or (
        list(base.expected) if base else [])
    facts = _strings(raw.get("facts"), f"{where}: 'facts'")
    need = raw.get("need")
    if need is not None and (not isinstance(need, int) or need < 1):
        raise InvalidInput(f"{where}: 'need' must be a positive integer")
    if not out and not facts:
        raise InvalidInput(f"{where} lists no 'facts' (or mark it out_of_scope: true)")
    if not out and not expected:
        raise InvalidInput(f"{where} lists no expected source")
    return AnswerCase(qid, text.strip(), [] if out else expected, facts, need, out)


def load_answer_key(path: Path) -> list[AnswerCase]:
    """The answer key at ``path`` (see the module docstring); ids must be unique."""
    name = path.name
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidInput(f"{name}: cannot read ({exc.strerror})") from exc
    except yaml.YAMLError as exc:
        raise InvalidInput(f"{name}: not valid YAML or JSON ({exc})") from exc
    known: dict[str, Any] = {}
    if isinstance(data, Mapping):
        ref = data.get("questions_file")
        if ref is not None:
            if not isinstance(ref, str):
                raise InvalidInput(f"{name}: 'questions_file' must be a path")
            known = {q.id: q for q in load_questions(path.parent / ref)}
        data = data.get("questions")
    if not isinstance(data, list) or not data:
        raise InvalidInput(f"{name}: expected a non-empty list of questions (or "
                           "{questions: [...]})")
    cases = [_case(raw, i, name, known) for i, raw in enumerate(data, 1)]
    seen: set[str] = set()
    for c in cases:
        if c.id in seen:
            raise InvalidInput(f"{name}: duplicate id '{c.id}'")
        seen.add(c.id)
    return cases


# --- the rubric ----------------------------------------------------------------------------

_WORD = re.compile(r"[a-z0-9]+")
_SUFFIXES = ("ations", "ation", "ingly", "ings", "ing", "edly", "ers", "ies", "ied", "ed",
             "es", "er", "ly", "s")


def stem(word: str) -> str:
    """A light stemmer, enough for lenient matching: ``publishes``, ``published``,
    ``publishing`` and ``publisher`` all become ``publish``."""
    w = word.lower()
    for suffix in _SUFFIXES:
        if w.endswith(suffix) and len(w) - len(suffix) >= 3 and not w.endswith("ss"):
            w = w[: -len(suffix)] + ("y" if suffix in ("ies", "ied") else "")
            if (suffix[0] in "ei" and len(w) > 3 and w[-1] == w[-2]
                    and w[-1] not in "aeioulsz"):  # dropped, dropping -> drop
                w = w[:-1]
            break
    if w.endswith("e") and len(w) > 3:  # "subscribe" / "subscribing"
        w = w[:-1]
    return w


def stems(text: str) -> set[str]:
    return {stem(w) for w in _WORD.findall(text.lower())}


def fact_stated(fact: str, answer_stems: set[str]) -> bool:
    """Whether one alternative of ``fact`` has all its words in the answer."""
    for alternative in fact.split("|"):
        words = [stem(w) for w in _WORD.findall(alternative.lower())]
        if words and all(w in answer_stems for w in words):
            return True
    return False


_FENCE = re.compile(r"```[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_SPAN = re.compile(r"`([^`\n]+)`")
_TERM_PATTERNS = (
    re.compile(r"(?<![\w.])[A-Za-z_]\w*(?:[._]\w+)+"),  # rclpy.init, create_publisher
    re.compile(r"(?<![\w-])--?[a-zA-Z][\w-]+"),          # --ros-args, -p
    re.compile(r"\b[a-z]+[A-Z]\w*|\b[A-Z][a-z0-9]+[A-Z]\w*"),  # camelCase, MinimalPublisher
    re.compile(r"(?<![\w.])([A-Za-z_]\w*)\("),           # spin(
)
_CODE_TOKEN = re.compile(r"[A-Za-z_][\w.\-/]*[\w]")


def terms(answer: str) -> list[str]:
    """The commands and identifiers of an answer, in order, without repeats."""
    found: list[str] = []
    code = [m.group(1) for m in _FENCE.finditer(answer)]
    prose = _FENCE.sub(" ", answer)
    code += [m.group(1) for m in _SPAN.finditer(prose)]
    prose = _SPAN.sub(" ", prose)
    for block in code:
        for line in block.splitlines():
            line = line.split("#", 1)[0]  # comments are prose
            found += _CODE_TOKEN.findall(line)
    for pattern in _TERM_PATTERNS:
        for m in pattern.finditer(prose):
            found.append(m.group(m.lastindex or 0))
    out: list[str] = []
    for t in found:
        t = t.strip(".-/")
        if len(t) >= 2 and t not in out:
            out.append(t)
    return out


# Words of a code block that are no command or API of their own: Python's keywords and
# English glue (a model often writes prose inside a fence).
_GLUE = ("self true false none the a an and or of to in on is are be can it this that "
         "with for your you use run then from by as at if not")
_NOT_TERMS = frozenset(keyword.kwlist) | frozenset(_GLUE.split())


def invented_terms(answer: str, context: str) -> list[str]:
    """Terms of the answer found nowhere in ``context`` as a whole word (case-insensitive:
    ``all`` is not found in ``calls``)."""
    low = context.lower()
    return [t for t in terms(answer) if t.lower() not in _NOT_TERMS
            and not re.search(r"(?<![\w])" + re.escape(t.lower()) + r"(?![\w])", low)]


_REFUSALS = (
    "not available in the provided context", "not in the provided context",
    "not contain", "does not mention", "doesn't mention", "no information",
    "not provided", "not available", "cannot find", "can't find", "could not find",
    "couldn't find", "i don't know", "i do not know", "unable to answer",
    "not mentioned", "no mention", "not covered", "not included", "not able to answer",
    "do not say", "does not say", "don't say", "doesn't say",
)


def refuses(answer: str) -> bool:
    """Whether the answer says the context does not hold what was asked."""
    low = " ".join(answer.lower().replace("\u2019", "'").split())
    return any(phrase in low for phrase in _REFUSALS)


@dataclass(slots=True)
class AnswerResult:
    id: str
    question: str
    out_of_scope: bool
    path: str | None
    answer: str
    facts: dict[str, bool]
    correct: bool
    cited: bool
    invented: list[str]
    refused: bool
    refused_correctly: bool
    echoed: bool
    sources: list[str]
    seconds: float
    error: str | None = None


@dataclass(slots=True)
class Reply:
    """What the chat answered: its text, path and sources (``/api/chat``'s fields)."""

    answer: str
    path: str | None
    sources: list[dict[str, Any]]


def _source_label(source: Mapping[str, Any]) -> str:
    return str(source.get("source_path") or source.get("source_url") or source.get("id") or "")


def _flat(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


def echoes(answer: str, question: str) -> bool:
    """Whether the answer repeats the question word for word as its prompt labelled it
    (``Question: ...``, ``User query: "..."``, ``The user's query is: ...``); a heading
    that happens to match a short question is no echo."""
    said, asked = _flat(answer), _flat(question)
    return any(f"{label} {asked}" in said for label in ("question", "query", "query is"))


def judge(case: AnswerCase, reply: Reply, context: str, seconds: float) -> AnswerResult:
    """Score one answer by the rubric (module docstring); ``context`` is the text of the
    documents the answer cites."""
    answer_stems = stems(reply.answer)
    facts = {f: fact_stated(f, answer_stems) for f in case.facts}
    refused = refuses(reply.answer)
    cited = any(matches(e, s) for s in reply.sources for e in case.expected)
    echoed = echoes(reply.answer, case.question)
    correct = (not case.out_of_scope and sum(facts.values()) >= case.required
               and case.required > 0 and not echoed)
    # what the model was shown of each document: its text and its header (title, path, URL)
    shown = [str(s.get(k) or "") for s in reply.sources
             for k in ("title", "source_path", "source_url")]
    invented = invented_terms(reply.answer, "\n".join([context, case.question, *shown]))
    refused_ok = case.out_of_scope and (reply.path == "general" or refused)
    return AnswerResult(case.id, case.question, case.out_of_scope, reply.path, reply.answer,
                        facts, correct, cited, invented, refused, refused_ok, echoed,
                        [_source_label(s) for s in reply.sources], round(seconds, 2))


# --- a run ---------------------------------------------------------------------------------

Ask = Callable[[str], Reply]
"""Ask one question (a fresh conversation) and return the reply."""
Fetch = Callable[[Mapping[str, Any]], str]
"""The text of a cited source (``{id, collection, ...}``); ``""`` when it is not a document."""


@dataclass(slots=True)
class AnswerReport:
    metrics: dict[str, Any]
    answers: list[AnswerResult]
    config: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"version": REPORT_VERSION, "config": self.config, "metrics": self.metrics,
                "answers": [asdict(a) for a in self.answers]}


def score(results: Sequence[AnswerResult]) -> dict[str, Any]:
    """Totals: counts of correct, cited, invented (answers with at least one invented
    term), refused (in-scope answers that refused), refused correctly and echoed, and
    seconds per answer."""
    inside = [r for r in results if not r.out_of_scope and r.error is None]
    outside = [r for r in results if r.out_of_scope and r.error is None]
    timed = [r.seconds for r in results if r.error is None]
    return {
        "questions": len(results), "in_scope": len(inside), "out_of_scope": len(outside),
        "errors": sum(r.error is not None for r in results),
        "correct": sum(r.correct for r in inside),
        "cited": sum(r.cited for r in inside),
        "invented": sum(bool(r.invented) for r in results if r.error is None),
        "refused": sum(r.refused for r in inside),
        "refused_correctly": sum(r.refused_correctly for r in outside),
        "echoed": sum(r.echoed for r in results if r.error is None),
        "facts_stated": round(sum(sum(r.facts.values()) for r in inside)
                              / max(1, sum(len(r.facts) for r in inside)), 4),
        "seconds_per_answer": round(sum(timed) / len(timed), 2) if timed else 0.0,
    }


def evaluate(cases: Iterable[AnswerCase], ask: Ask, fetch: Fetch,
             config: Mapping[str, Any] | None = None,
             progress: Callable[[AnswerResult], None] | None = None,
             clock: Callable[[], float] = time.perf_counter) -> AnswerReport:
    """Ask every question and judge its answer. A question whose turn fails is reported
    with its error (and counted in ``errors``), the run goes on."""
    from ragline.errors import RaglineError

    results: list[AnswerResult] = []
    texts: dict[str, str] = {}
    for case in cases:
        t0 = clock()
        try:
            reply = ask(case.question)
        except RaglineError as exc:
            result = AnswerResult(case.id, case.question, case.out_of_scope, None, "",
                                  dict.fromkeys(case.facts, False), False, False, [], False,
                                  False, False, [], round(clock() - t0, 2), exc.message)
        else:
            seconds = clock() - t0
            parts = []
            for s in reply.sources:
                key = json.dumps([s.get("collection"), s.get("id")])
                if key not in texts:
                    texts[key] = fetch(s)
                parts.append(texts[key])
            result = judge(case, reply, "\n".join(parts), seconds)
        results.append(result)
        if progress is not None:
            progress(result)
    return AnswerReport(score(results), results, dict(config or {}))
