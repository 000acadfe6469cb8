"""``ragline eval answers``: answer quality by a reproducible rubric (issue 36 item 4).

Each question of an answer key goes through the chat flow (``POST /api/chat`` of a
server, or the same turn on the data directory opened here) and its answer is scored by
:mod:`ragline.evaluation.answers`: facts stated, a right source cited, no invented
commands, out-of-scope questions refused. Registered on the ``eval`` app by
:mod:`ragline.cli.main`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from ragline.cli.common import client_command
from ragline.cli.eval_cmd import finish_report
from ragline.cli.target import Target


def register(app: typer.Typer) -> None:
    app.command("answers")(answers)


@client_command
def answers(
    path: Annotated[Path, typer.Argument(help="Answer key: .yaml/.yml or .json.")],
    target: Target, as_json: bool,
    collection: Annotated[str, typer.Option(help="Collection the chat answers from.")],
    only: Annotated[list[str] | None, typer.Option(
        "--only", help="Ask only these question ids (repeat).")] = None,
    output: Annotated[Path | None, typer.Option(
        help="Also write the JSON report to this file.")] = None,
    min_correct: Annotated[int | None, typer.Option(
        help="Fail (exit 1) when fewer answers are correct.")] = None,
    max_invented: Annotated[int | None, typer.Option(
        help="Fail when more answers invent commands.")] = None,
) -> None:
    """Ask each question of the answer key through the chat and score the answers:
    correct (its facts stated), cited (a right source), invented (commands found in no
    retrieved document), refused correctly (out-of-scope questions); seconds per answer.

    Needs a chat model (RAGLINE_LLM_BASE_URL, RAGLINE_LLM_MODEL). Exit code 1 when a
    --min/--max threshold is missed, 2 for bad input, 3 for an unknown collection.
    """
    from ragline.errors import RaglineError
    from ragline.evaluation import answers as ev

    console = Console(stderr=True)
    try:
        cases = ev.load_answer_key(path)
    except RaglineError as exc:
        console.print(f"[red]error:[/red] {exc.message}")
        raise typer.Exit(2) from exc
    if only:
        unknown = sorted(set(only) - {c.id for c in cases})
        if unknown:
            console.print(f"[red]error:[/red] unknown question id(s): {', '.join(unknown)}")
            raise typer.Exit(2)
        cases = [c for c in cases if c.id in only]
    target.get_collection(collection)  # 404 (exit 3) before the first question

    def progress(r: ev.AnswerResult) -> None:
        console.print(f"  {r.id}: {_verdict(r)} ({r.seconds:.1f}s)", highlight=False)

    report = ev.evaluate(cases, _asker(target, collection), _fetcher(target),
                         {"collection": collection, "file": path.name,
                          "target": target.where}, progress)
    _print_report(console, report)
    payload = report.to_json()
    failures = []
    if min_correct is not None and report.metrics["correct"] < min_correct:
        failures.append(f"{report.metrics['correct']} correct answers "
                        f"(at least {min_correct} wanted)")
    if max_invented is not None and report.metrics["invented"] > max_invented:
        failures.append(f"{report.metrics['invented']} answers invent commands "
                        f"(at most {max_invented} allowed)")
    finish_report(console, payload, failures, output, as_json)


def _asker(target: Target, collection: str) -> Any:
    from ragline.errors import ServiceUnavailable
    from ragline.evaluation.answers import Reply

    def ask(question: str) -> Reply:
        if hasattr(target, "chat_stream"):  # a server: streamed, so a slow model's answer
            done: dict[str, Any] | None = None  # is not cut by the read timeout
            parts: list[str] = []
            for event in target.chat_stream(question, collection=collection):
                if event.event == "token":
                    parts.append(str(event.data.get("text", "")))
                elif event.event == "done":
                    done = event.data
                elif event.event == "error":
                    raise ServiceUnavailable(str(event.data.get("message", "chat failed")))
            if done is None:
                raise ServiceUnavailable("the chat stream ended without an answer")
            return Reply("".join(parts), done.get("path"), list(done.get("sources") or []))
        got = target.chat(question, collection=collection)
        return Reply(got.answer, got.path, list(got.sources))
    return ask


def _fetcher(target: Target) -> Any:
    from ragline.errors import RaglineError

    def fetch(source: Mapping[str, Any]) -> str:
        if not source.get("collection") or not source.get("id"):
            return ""
        try:
            return target.get_document(str(source["collection"]), str(source["id"])).text
        except RaglineError:
            return ""
    return fetch


def _verdict(r: Any) -> str:
    if r.error:
        return f"error: {r.error}"
    if r.out_of_scope:
        return "refused correctly" if r.refused_correctly else "answered out of scope"
    found = sum(r.facts.values())
    words = ["correct" if r.correct else f"facts {found}/{len(r.facts)}",
             "cited" if r.cited else "not cited"]
    if r.echoed:
        words.append("echoed the question")
    if r.invented:
        words.append("invented " + ", ".join(r.invented[:3]))
    return "; ".join(words)


def _print_report(console: Console, report: Any) -> None:
    from ragline.cli.common import fitted

    console.print(fitted(
        f"{report.metrics['questions']} questions on {report.config['collection']}",
        ["id", "path", "verdict", "s", "answer"],
        [(r.id, r.path or "-", _verdict(r), f"{r.seconds:.1f}",
          " ".join(r.answer.split())[:80]) for r in report.answers],
        console.width))
    m = report.metrics
    console.print(f"  correct {m['correct']}/{m['in_scope']}, cited {m['cited']}/"
                  f"{m['in_scope']}, invented {m['invented']}/"
                  f"{m['questions'] - m['errors']}, refused correctly "
                  f"{m['refused_correctly']}/{m['out_of_scope']}, facts stated "
                  f"{m['facts_stated']:.0%}, echoed {m['echoed']}, "
                  f"{m['seconds_per_answer']:.1f} s per answer"
                  + (f", {m['errors']} errors" if m["errors"] else ""), highlight=False)
