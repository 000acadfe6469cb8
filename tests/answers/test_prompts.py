"""Prompts: spec 001's four prompts word for word (name substituted), the conditional
knowledge-base block, per-collection overrides, placeholder errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ragline.errors import InvalidInput
from ragline.prompts import DEFAULTS, Prompts, render

SPEC_001 = """\
You are a helpful AI assistant with access to the following tools:
TOOLS

IMPORTANT INSTRUCTIONS FOR TOOL USE:
- Review any 'ADDITIONAL CONTEXT FROM KNOWLEDGE BASE' provided below before making a tool decision.
- If the 'ADDITIONAL CONTEXT FROM KNOWLEDGE BASE' fully and accurately answers the 'User query', choose 'none' for the tool.
- Otherwise, if your general knowledge is sufficient, choose 'none'.
- Use tools like 'search_engine' for time-sensitive information (e.g., current prices, news), real-time data, or specifics not in your training or the provided context.


ADDITIONAL CONTEXT FROM KNOWLEDGE BASE (Consider this before deciding on a tool):
---
CTX
---


User query: "Q?"

Considering the user query, tools, instructions, and any additional context, do you need to use a tool? Or is the provided context/your general knowledge sufficient?
Respond ONLY with a JSON object specifying the "tool_name" (e.g., "search_engine", or "none" if no tool is needed) and, if a tool is chosen, an "arguments" object for that tool. Example for tool use: {"tool_name": "search_engine", "arguments": {"query": "latest Bitcoin news"}}. Example for no tool: {"tool_name": "none"}."""  # noqa: E501


def test_tool_decision_word_for_word_with_and_without_context() -> None:
    p = Prompts("ragline")
    assert p.tool_decision("TOOLS", "CTX", "Q?") == SPEC_001
    without = p.tool_decision("TOOLS", None, "Q?")
    assert "ADDITIONAL CONTEXT FROM KNOWLEDGE BASE (Consider" not in without
    assert "CTX" not in without
    # the block vanishes entirely: only the lines around it remain
    assert "tool_name" in without and 'User query: "Q?"' in without


def test_synthesis_prompts_word_for_word_with_the_assistant_name() -> None:
    p = Prompts("Hermes")
    strict = p.strict_context("CTX", "Q?")
    assert strict == (
        'SYSTEM INSTRUCTION: You are in STRICT CONTEXT-ONLY MODE. Your primary goal is to '
        "answer the user's query using ONLY the \"Context from Knowledge Base\" provided. "
        "Do not use any external knowledge or your general training data. If the context "
        "does not contain the answer, explicitly state that the information is not "
        "available in the provided context.\n"
        "ROLE: You are Hermes, an assistant that answers strictly from the provided text.\n"
        "Context from Knowledge Base:\n---\nCTX\n---\nOriginal Query:\nQ?\n"
        "Your answer (ONLY from the context provided):")
    assert p.general_knowledge("Q?") == (
        "SYSTEM INSTRUCTION: You are Hermes. Please provide a helpful and concise answer to "
        "the following user query based on your general knowledge.\nUser Query:\n\"Q?\"\n\n"
        "Based on this, provide a direct answer.")
    assert p.post_tool("Q?", "fetch_url", {"a": [1, "x"]}) == (
        'User query: "Q?"\nI used the \'fetch_url\' tool and received the following '
        'information:\n{"a": [1, "x"]}\nBased on this information, please provide a concise '
        "answer to the user's query. If the information is an error message, explain the "
        "error. If the information is complex, summarize it. Respond directly to the user.")
    assert "hermitAI" not in "".join(DEFAULTS.values())


def test_values_are_inserted_verbatim() -> None:
    out = Prompts("r").general_knowledge("cost of ${rag_context} and $5 {{#if x}}")
    assert "cost of ${rag_context} and $5 {{#if x}}" in out


def test_checklist_prompt_has_alert_parts_and_asks_for_json() -> None:
    out = Prompts("r").format("checklist", alert_title="High CPU", resource_type="vm",
                              resource_shape="VM.Standard.E4.Flex", labels="cpu",
                              metrics="- cpu: 97", logs="- oom", runbook_chunks="[1] fix it")
    for part in ("High CPU", "vm", "VM.Standard.E4.Flex", "- cpu: 97", "- oom", "[1] fix it",
                 "Respond ONLY with a JSON object"):
        assert part in out


def test_collection_override_and_errors() -> None:
    p = Prompts("r", {"prompts": {"general_knowledge": "Be brief, ${assistant_name}: "
                                  "${original_user_query}"}})
    assert p.general_knowledge("hi") == "Be brief, r: hi"
    p = Prompts("r", {"prompts": '{"strict_context": "ONLY: ${rag_context}"}'})  # JSON text
    assert p.strict_context("C", "q") == "ONLY: C"
    with pytest.raises(InvalidInput, match="Unknown prompt name"):
        Prompts("r", {"prompts": {"nope": "x"}})
    with pytest.raises(InvalidInput, match="must be an object"):
        Prompts("r", {"prompts": 3})
    with pytest.raises(InvalidInput, match=r"unknown placeholder \$\{typo\}"):
        Prompts("r", {"prompts": {"general_knowledge": "${typo}"}}).general_knowledge("q")


def test_override_key_is_documented() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "answers.md").read_text()
    assert "`prompts`" in doc
    for name in DEFAULTS:
        assert re.search(rf"`{name}`", doc), name


def test_render_conditional_blocks() -> None:
    assert render("a{{#if x}}[${x}]{{/if}}b", x="1") == "a[1]b"
    assert render("a{{#if x}}[${x}]{{/if}}b", x="") == "ab"
