"""Tool decisions: tolerant JSON extraction, strict validation against the registered tools."""

from __future__ import annotations

from ragline.services.answers.tool_choice import (
    describe_tools,
    extract_json_object,
    parse_tool_decision,
)
from ragline.services.tools.base import Tool
from ragline.services.tools.builtin import FetchUrl, SearchKnowledgeBase

TOOLS: dict[str, Tool] = {"fetch_url": FetchUrl(), "search_knowledge_base": SearchKnowledgeBase()}


def test_fenced_and_surrounded_json_is_found() -> None:
    text = 'Sure! Here it is:\n```json\n{"tool_name": "fetch_url", "arguments": ' \
           '{"url": "https://example.com"}}\n```\nHope that helps {not json}'
    d = parse_tool_decision(text, TOOLS)
    assert (d.tool_name, d.arguments, d.problem) == (
        "fetch_url", {"url": "https://example.com"}, None)
    d = parse_tool_decision('I think {"tool_name": "none"} is right.', TOOLS)
    assert d.tool_name == "none" and d.problem is None
    assert extract_json_object('x {"a": {"b": 1}} y {"c": 2}') == {"a": {"b": 1}}


def test_invalid_decisions_become_none_with_a_reason() -> None:
    cases = {
        "no json here": "no JSON object",
        '{"tool_name": "search_engine", "arguments": {"query": "x"}}': "unknown tool",
        '{"arguments": {}}': "no 'tool_name'",
        '{"tool_name": "fetch_url"}': "missing argument 'url'",
        '{"tool_name": "fetch_url", "arguments": {"url": 5}}': "must be string",
        '{"tool_name": "fetch_url", "arguments": "https://x"}': "not an object",
        '{"tool_name": "search_knowledge_base", "arguments": {"query": "q", "limit": true}}':
            "must be integer",
        '{"tool_name": "fetch_url", "arguments": {"url": "https://x"': "no JSON object",
    }
    for raw, reason in cases.items():
        d = parse_tool_decision(raw, TOOLS)
        assert d.tool_name == "none", raw
        assert d.problem is not None and reason in d.problem, (raw, d.problem)


def test_tool_descriptions_list_every_tool_with_arguments() -> None:
    text = describe_tools(TOOLS)
    assert text.splitlines()[0].startswith("- fetch_url: Fetch a public web page")
    assert "url (string, required)" in text
    assert "- search_knowledge_base:" in text and "query (string, required)" in text
