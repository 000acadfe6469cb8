"""`ragline eval answers`' rubric over the real model with the ``small`` prompt profile.

The 135M model's wording is not asserted (BENCHMARKS.md has what it gets right on the
book); what is: every question gets a scored answer through the real chat turn, the small
profile's short prompts and answer cap reach the model server, an answer from the
knowledge base cites its document, and an out-of-scope question is answered without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragline.evaluation.answers import AnswerCase, Reply, evaluate
from ragline.facade import DocumentInput, Ragline
from ragline.prompts import PROFILES
from ragline.settings import Settings
from ragline.testing.llama_server import MODEL_ALIAS, RecordingProxy

FACT = "To see the messages on a topic as they arrive, run ros2 topic echo /chatter."


def test_rubric_scores_real_answers_with_the_small_profile(tmp_path: Path,
                                                           proxy: RecordingProxy) -> None:
    settings = Settings(data_dir=tmp_path / "data", llm_base_url=proxy.url,  # type: ignore[call-arg]
                        llm_model=MODEL_ALIAS, llm_max_tokens=48, llm_timeout_s=600,
                        _env_file=None)
    cases = [AnswerCase("echo", "Which command shows the messages on a topic?",
                        ["ros2/topics.md"], ["topic echo"]),
             AnswerCase("poem", "Write a short poem about autumn leaves.", [], [],
                        out_of_scope=True)]
    with Ragline(settings) as rl:
        me = rl.owner()
        rl.collections.create(me, "kb", {"prompt_profile": "small"},
                             embed={"provider": "local"})
        rl.documents.add(me, "kb", [DocumentInput(FACT, {"title": "Topics", "source_path":
                                                         "ros2/topics.md"}, None, "t")])

        def ask(question: str) -> Reply:
            async def turn() -> dict[str, Any]:
                return await rl.answers.chat(me, question, collection="kb")
            out = rl.call_sync(turn)
            return Reply(out["answer"], out["path"], out["sources"])

        def fetch(source: Any) -> str:
            return rl.documents.get(me, source["collection"], source["id"]).text

        report = evaluate(cases, ask, fetch)
    echo, poem = report.answers
    assert report.metrics["errors"] == 0 and echo.answer.strip() and poem.answer.strip()
    assert echo.path in {"rag", "tool"}  # the decision may still pick a tool
    if echo.path == "rag":
        assert echo.cited
    assert poem.path == "general" and poem.refused_correctly
    small = PROFILES["small"]
    final = [b for b in proxy.bodies() if b.get("stream")]
    assert small.max_tokens and small.max_tokens > 48  # the lower cap (the setting) wins
    assert len(final) == 2 and all(b["max_tokens"] == 48 for b in final)
    first = final[0]["messages"][0]["content"]
    if echo.path == "rag":
        assert first.startswith("Answer the question from these documents only.")
        assert FACT in first
    assert report.metrics["seconds_per_answer"] > 0
