"""`ragline eval answers`: the answer key, the rubric's verdicts on scripted answers, the
totals, and the command on a data directory with a chat server."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, cast

import pytest
from typer.testing import CliRunner

from ragline.errors import InvalidInput, ServiceUnavailable
from ragline.evaluation.answers import (
    AnswerCase,
    Reply,
    evaluate,
    fact_stated,
    invented_terms,
    load_answer_key,
    refuses,
    stems,
    terms,
)
from ragline.facade import Ragline
from ragline.testing.fake_openai import fake_openai_server
from tests.ingestion_support import BOOK, SENSING, fake_settings

ROOT = Path(__file__).resolve().parents[2]
LESSON = "module-1/chapter-3/03-nodes-topics.md"
CONTEXT = ("To watch a topic live, run ros2 topic echo /chatter. The node calls "
           "self.create_publisher(String, 'chatter', 10) and rclpy.spin(node).")


def _source(path: str = LESSON) -> dict[str, Any]:
    return {"id": "c1", "collection": "book", "source_path": path, "title": "Topics"}


class ScriptedChat:
    """Answers each question from a script: the chat of these unit tests."""

    def __init__(self, replies: Mapping[str, Reply | Exception]) -> None:
        self.replies = replies
        self.asked: list[str] = []

    def __call__(self, question: str) -> Reply:
        self.asked.append(question)
        reply = self.replies[question]
        if isinstance(reply, Exception):
            raise reply
        return reply


def _fetch(source: Mapping[str, Any]) -> str:
    return CONTEXT if source.get("id") == "c1" else ""


def _ticks() -> Iterator[float]:
    t = 0.0
    while True:
        yield t
        t += 2.0


def _clock() -> Any:
    ticks = _ticks()
    return lambda: next(ticks)


# --- matching --------------------------------------------------------------------------------


def test_facts_match_leniently_by_stem_and_alternative() -> None:
    said = stems("The node Publishes messages; a subscriber's queue drops the OLDEST one.")
    assert fact_stated("publisher message", said)  # publishes ~ publisher, messages ~ message
    assert fact_stated("subscribe queue", said)
    assert fact_stated("dropped|discarded", said)
    assert fact_stated("nothing here|oldest", said)  # one wording is enough
    assert not fact_stated("queue depth", said)  # every word of a wording is needed


def test_terms_are_commands_and_identifiers() -> None:
    answer = ("Run `ros2 topic echo /chatter` or call node.create_publisher() with "
              "--ros-args; MinimalPublisher spins.\n```bash\nros2 topic hz /chatter  # rate\n```")
    found = terms(answer)
    for t in ("ros2", "topic", "echo", "/chatter".strip("/"), "node.create_publisher",
              "--ros-args".strip("-"), "MinimalPublisher", "hz"):
        assert t in found, (t, found)
    assert "rate" not in found  # a comment is prose
    assert "Run" not in found and "spins" not in found


def test_invented_terms_are_those_in_no_retrieved_document() -> None:
    answer = "Use `ros2 topic echo /chatter`, then `ros2 topic sniff` and rclpy.spin_forever()."
    assert invented_terms(answer, CONTEXT) == ["sniff", "rclpy.spin_forever"]
    assert invented_terms("Run `ros2 topic echo /chatter`.", CONTEXT) == []
    # the language's keywords and prose inside a fence are no commands
    assert invented_terms("```python\nfrom rclpy import spin\nreturn the sniff\n```",
                          CONTEXT) == ["sniff"]


@pytest.mark.parametrize(("answer", "refused"), [
    ("The information is not available in the provided context.", True),
    ("The context doesn\u2019t mention sourdough.", True),
    ("I don't know.", True),
    ("Mix flour, water and salt, then bake at 230 C.", False),
])
def test_refusals(answer: str, refused: bool) -> None:
    assert refuses(answer) is refused


# --- the rubric's verdicts ---------------------------------------------------------------------


CASES = [
    AnswerCase("echo", "Which command shows a topic's messages?", [LESSON],
               ["ros2 topic echo"]),
    AnswerCase("made-up", "How do I save a topic?", [LESSON], ["ros2 topic echo"]),
    AnswerCase("wrong-source", "Which command shows messages live?", [LESSON],
               ["topic echo", "real time|live"], need=1),
    AnswerCase("bread", "What is a good bread recipe?", [], [], out_of_scope=True),
    AnswerCase("tax", "How do I file taxes?", [], [], out_of_scope=True),
    AnswerCase("poem", "Write a poem.", [], [], out_of_scope=True),
    AnswerCase("down", "Is the model up?", [LESSON], ["yes"]),
    AnswerCase("parrot", "Which command echoes a topic?", [LESSON], ["topic echo"]),
]


def test_verdicts_of_the_rubric() -> None:
    chat = ScriptedChat({
        # states the fact, cites the lesson, uses only the context's commands
        "Which command shows a topic's messages?": Reply(
            "Run `ros2 topic echo /chatter` to see them.", "rag", [_source()]),
        # cites the lesson but invents a command and misses the fact
        "How do I save a topic?": Reply(
            "Use `ros2 topic record --all` to save it.", "rag", [_source()]),
        # one of two facts is enough here (need: 1), but the source is another lesson
        "Which command shows messages live?": Reply(
            "ros2 topic echo prints them (other.md).", "rag",
            [_source("module-9/other.md")]),
        # out of scope: answered generally (no knowledge base) -> refused correctly
        "What is a good bread recipe?": Reply("Flour, water, salt.", "general", []),
        # out of scope: answered from the book's context as if it knew -> wrong
        "How do I file taxes?": Reply("Run ros2 topic echo.", "rag", [_source()]),
        # out of scope with context, but the answer says the context lacks it -> right
        "Write a poem.": Reply("That is not available in the provided context.", "rag",
                               [_source()]),
        "Is the model up?": ServiceUnavailable("the chat model is down"),
        # continues the prompt: the question, then the documents (facts and all)
        "Which command echoes a topic?": Reply(
            "Question: Which command echoes a topic? Answer: Document: run ros2 topic echo",
            "rag", [_source()]),
    })
    report = evaluate(CASES, chat, _fetch, {"collection": "book"}, clock=_clock())
    by = {r.id: r for r in report.answers}
    assert (by["echo"].correct, by["echo"].cited, by["echo"].invented) == (True, True, [])
    assert by["echo"].facts == {"ros2 topic echo": True} and by["echo"].seconds == 2.0
    assert (by["made-up"].correct, by["made-up"].cited) == (False, True)
    assert by["made-up"].invented == ["record", "all"]
    assert (by["wrong-source"].correct, by["wrong-source"].cited) == (True, False)
    assert by["wrong-source"].invented == []  # the cited file's name is no invention
    assert by["bread"].refused_correctly and by["bread"].path == "general"
    assert not by["tax"].refused_correctly
    assert by["poem"].refused_correctly and by["poem"].refused
    assert by["down"].error == "the chat model is down" and not by["down"].correct
    assert by["parrot"].echoed and by["parrot"].cited and not by["parrot"].correct
    assert by["parrot"].facts == {"topic echo": True}
    assert report.metrics == {
        "questions": 8, "in_scope": 4, "out_of_scope": 3, "errors": 1, "correct": 2,
        "cited": 3, "invented": 1, "refused": 0, "refused_correctly": 2, "echoed": 1,
        "facts_stated": 0.6, "seconds_per_answer": 2.0}
    assert report.to_json()["answers"][0]["answer"].startswith("Run `ros2 topic echo")


def test_same_answers_same_verdicts() -> None:
    replies = {c.question: Reply("Run ros2 topic echo. Not available otherwise.", "rag",
                                 [_source()]) for c in CASES}
    first = evaluate(CASES, ScriptedChat(replies), _fetch, clock=_clock()).to_json()
    second = evaluate(CASES, ScriptedChat(replies), _fetch, clock=_clock()).to_json()
    assert first == second


# --- the answer key -----------------------------------------------------------------------------


def test_answer_key_takes_questions_from_the_questions_file(tmp_path: Path) -> None:
    (tmp_path / "q.yaml").write_text(
        "questions:\n  - id: echo\n    question: Which command echoes?\n"
        "    expected: m/c/03-topics.md\n")
    key = tmp_path / "a.yaml"
    key.write_text("questions_file: q.yaml\nquestions:\n  - id: echo\n"
                   "    facts: [topic echo]\n  - id: bread\n    question: Bread?\n"
                   "    out_of_scope: true\n")
    echo, bread = load_answer_key(key)
    assert (echo.question, echo.expected, echo.facts) == (
        "Which command echoes?", ["m/c/03-topics.md"], ["topic echo"])
    assert bread.out_of_scope and bread.expected == [] and bread.required == 0


@pytest.mark.parametrize(("text", "message"), [
    ("- id: a\n  question: q?\n  expected: x.md\n", "lists no 'facts'"),
    ("- id: a\n  question: q?\n  facts: [x]\n", "no expected source"),
    ("- id: a\n  facts: [x]\n  expected: x.md\n", "has no 'question'"),
    ("- {id: a, question: 'q?', expected: x.md, facts: [x]}\n"
     "- {id: a, question: 'r?', expected: x.md, facts: [y]}\n", "duplicate id 'a'"),
    ("- {id: a, question: 'q?', expected: x.md, facts: [x], need: 0}\n", "'need'"),
    ("questions: []\n", "non-empty list"),
])
def test_bad_answer_keys_are_refused(tmp_path: Path, text: str, message: str) -> None:
    key = tmp_path / "a.yaml"
    key.write_text(text)
    with pytest.raises(InvalidInput, match=message):
        load_answer_key(key)


def test_the_shipped_book_answer_key_loads() -> None:
    cases = load_answer_key(ROOT / "benchmarks" / "book_answers.yaml")
    inside = [c for c in cases if not c.out_of_scope]
    assert len(inside) >= 15 and len(cases) - len(inside) >= 3
    assert all(c.expected and c.facts for c in inside)


# --- the command -------------------------------------------------------------------------------


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    settings = fake_settings(tmp_path)
    rl = Ragline(settings).start()
    try:
        rl.services.ingest.run_directory("book", rl.owner().tenant, BOOK)
    finally:
        rl.close()
    return settings.data_dir


def test_command_asks_the_chat_and_scores(data_dir: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """In process, through the real chat turn and an OpenAI-compatible server that echoes
    the prompt: the answer holds the retrieved lesson and cites it, states its facts, and
    is no answer (echoed), as the rubric says."""
    from ragline.cli.main import app

    key = tmp_path / "key.yaml"
    key.write_text(
        f"- id: sense\n  question: How do robots sense the world?\n  expected: {SENSING}\n"
        "  facts: [sensor]\n"
        "- id: sense-twice\n  question: What do robot sensors measure?\n"
        f"  expected: {SENSING}\n  facts: [sensor, submarine]\n")
    with fake_openai_server() as fake:
        monkeypatch.setenv("RAGLINE_LLM_BASE_URL", fake.url)
        monkeypatch.setenv("RAGLINE_LLM_MODEL", "fake-model")
        monkeypatch.setenv("RAGLINE_RAG_RELEVANCE_THRESHOLD", "0")  # fake vectors are random
        monkeypatch.setenv("RAGLINE_DEFAULT_EMBEDDER", "fake")

        def run(*extra: str) -> Any:
            return CliRunner().invoke(app, ["eval", "answers", str(key), "--collection",
                                            "book", "--data-dir", str(data_dir), *extra])

        result = run("--json", "--output", str(tmp_path / "r.json"))
        assert result.exit_code == 0, result.stderr
        report = json.loads(result.stdout.strip().splitlines()[-1])
        assert report == json.loads((tmp_path / "r.json").read_text())
        sense, twice = report["answers"]
        assert sense["path"] == "rag" and sense["cited"] and sense["facts"] == {"sensor": True}
        assert sense["echoed"] and not sense["correct"]
        assert SENSING in sense["sources"]
        assert twice["facts"] == {"sensor": True, "submarine": False}
        assert not twice["correct"]
        assert report["metrics"]["correct"] == 0 and report["metrics"]["cited"] == 2
        assert report["metrics"]["echoed"] == 2
        assert "correct 0/2, cited 2/2" in result.stderr and "echoed 2" in result.stderr
        asked = [b["body"]["messages"][-1]["content"] for b in fake.requests
                 if b["path"].endswith("/chat/completions")]
        assert any("How do robots sense the world?" in p for p in asked)

        # thresholds, unknown ids, unknown collections
        result = run("--min-correct", "1")
        assert result.exit_code == 1 and "0 correct answers" in result.stderr
        result = run("--only", "sense")
        assert result.exit_code == 0 and "sense-twice" not in result.stderr
        assert run("--only", "nope").exit_code == 2
    result = CliRunner().invoke(app, ["eval", "answers", str(key), "--collection", "nope",
                                      "--data-dir", str(data_dir)])
    assert result.exit_code == 3


def test_a_server_is_asked_through_the_stream() -> None:
    """Through a server the answer is streamed (a slow model's turn is not cut by the
    client's read timeout): tokens joined, path and sources from the done event, an error
    event raised as an error of that question."""
    from ragline.cli.eval_answers_cmd import _asker
    from ragline.client.models import ChatEvent

    class StreamingServer:
        def __init__(self, events: list[ChatEvent]) -> None:
            self.events = events
            self.asked: list[tuple[str, str | None]] = []

        def chat_stream(self, message: str, *, conversation_id: str | None = None,
                        collection: str | None = None) -> Iterator[ChatEvent]:
            self.asked.append((message, collection))
            yield from self.events

    server = StreamingServer([
        ChatEvent(event="token", data={"text": "Run ros2 "}),
        ChatEvent(event="token", data={"text": "topic echo."}),
        ChatEvent(event="done", data={"path": "rag", "sources": [_source()]})])
    reply = _asker(cast(Any, server), "book")("Which command?")
    assert (reply.answer, reply.path, reply.sources) == ("Run ros2 topic echo.", "rag",
                                                         [_source()])
    assert server.asked == [("Which command?", "book")]
    failing = StreamingServer([ChatEvent(event="error", data={"message": "model down"})])
    with pytest.raises(ServiceUnavailable, match="model down"):
        _asker(cast(Any, failing), "book")("q")
    with pytest.raises(ServiceUnavailable, match="without an answer"):
        _asker(cast(Any, StreamingServer([])), "book")("q")
