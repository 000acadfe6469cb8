"""Reading the model's tool decision: tolerant JSON, strict validation.

Models wrap JSON in code fences, add prose around it, or answer something else
entirely. :func:`extract_json_object` finds the first complete JSON object in
the text; :func:`parse_tool_decision` validates it against the registered tools
(name known, arguments an object satisfying the tool's schema's ``required`` and
basic ``type``s). Anything invalid becomes ``none`` with the reason recorded, so a
bad decision degrades to the context/general answer instead of failing the turn.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ragline.services.tools.base import Tool

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str, "integer": int, "number": (int, float), "boolean": bool,
    "object": dict, "array": list,
}


def extract_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` (fenced or bare, prose around it), or None."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for chunk in candidates:
        for start in (i for i, ch in enumerate(chunk) if ch == "{"):
            try:
                obj, _ = decoder.raw_decode(chunk, start)
            except ValueError:
                continue
            if isinstance(obj, dict):
                return obj
    return None


@dataclass
class ToolDecision:
    tool_name: str  # "none" or a registered tool
    arguments: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None  # why a decision was turned into "none"
    raw: str = ""


def _check_args(args: Mapping[str, Any], schema: Mapping[str, Any]) -> str | None:
    for name in schema.get("required", []):
        if name not in args or args[name] in (None, ""):
            return f"missing argument '{name}'"
    props = schema.get("properties", {})
    for name, value in args.items():
        spec = props.get(name)
        if spec is None:
            if schema.get("additionalProperties") is False:
                return f"unknown argument '{name}'"
            continue
        expected = _TYPES.get(spec.get("type", ""))
        if expected is None:
            continue
        ok = isinstance(value, expected) and not (
            spec.get("type") in ("integer", "number") and isinstance(value, bool))
        if not ok:
            return f"argument '{name}' must be {spec['type']}"
    return None


def parse_tool_decision(text: str, tools: Mapping[str, Tool]) -> ToolDecision:
    obj = extract_json_object(text or "")
    if obj is None:
        return ToolDecision("none", problem="no JSON object in the tool decision", raw=text)
    name = obj.get("tool_name", obj.get("tool"))
    if not isinstance(name, str) or not name.strip():
        return ToolDecision("none", problem="no 'tool_name' in the tool decision", raw=text)
    name = name.strip()
    if name.lower() == "none":
        return ToolDecision("none", raw=text)
    tool = tools.get(name)
    if tool is None:
        return ToolDecision("none", problem=f"unknown tool '{name}'", raw=text)
    args = obj.get("arguments", {})
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return ToolDecision("none", problem=f"arguments for '{name}' are not an object",
                            raw=text)
    problem = _check_args(args, tool.arguments)
    if problem:
        return ToolDecision("none", problem=f"{name}: {problem}", raw=text)
    return ToolDecision(name, args, raw=text)


def describe_tools(tools: Mapping[str, Tool]) -> str:
    """``${tool_descriptions}``: one line per tool with its arguments."""
    lines = []
    for name, tool in sorted(tools.items()):
        props = tool.arguments.get("properties", {})
        required = set(tool.arguments.get("required", []))
        args = ", ".join(
            f"{a} ({p.get('type', 'any')}{', required' if a in required else ''})"
            for a, p in props.items())
        lines.append(f"- {name}: {tool.description} Arguments: {args or 'none'}.")
    return "\n".join(lines)
