"""Every prompt ragline sends to a chat model, in one place.

The four chat prompts are spec 001 section 5 word for word, with two changes only:
the assistant's name (setting ``assistant_name``, default ``ragline``) replaces
"hermitAI", and the JavaScript placeholders became named ``${...}`` placeholders.
One documented departure (issue 37): the tool-decision prompt names ``search_engine``
(its instruction and its example) only when that tool is configured; otherwise it names
a tool that is registered, so no model is told to use a tool that is not there:

==========================  =========================================================
placeholder                 value
==========================  =========================================================
``${assistant_name}``       setting ``assistant_name``
``${tool_descriptions}``    one line per registered tool: name, description, arguments
``${example_tool}``         ``search_engine`` when web search is configured, else a
                            registered tool (see :func:`tool_example`)
``${example_arguments}``    its example arguments, ``{"query": "latest Bitcoin news"}``
``${rag_context}``          the formatted context of :func:`fetch_rag_context`
``${original_user_query}``  the user's message
``${effective_tool_name}``  the tool that ran
``${tool_output}``          ``JSON.stringify(toolOutput)``: the tool result as JSON
==========================  =========================================================

``{{#if rag_context}} ... {{/if}}`` keeps its block only when ``rag_context`` is
non-empty (spec 001's conditional knowledge-base block). ``$$`` is a literal ``$``.

**Profiles** (:data:`PROFILES`): ``spec`` is all of the above; ``small`` (setting
``prompt_profile`` or a collection's metadata key ``prompt_profile``) replaces the tool
decision, strict-context and general prompts with short ones and sizes the context for
sub-1B models (:class:`PromptProfile`), in the same flow; docs/answers.md.

**Per-collection overrides, no code:** a collection's metadata key ``prompts`` (an
object, or a JSON string of one) maps prompt names (:data:`PROMPT_NAMES`) to
templates using the same placeholders; see docs/answers.md. Unknown names and
unknown placeholders are refused when the prompt is rendered (400), so a typo
shows at once rather than as a literal ``${...}`` sent to the model.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ragline.errors import InvalidInput

TOOL_DECISION = """You are a helpful AI assistant with access to the following tools:
${tool_descriptions}

IMPORTANT INSTRUCTIONS FOR TOOL USE:
- Review any 'ADDITIONAL CONTEXT FROM KNOWLEDGE BASE' provided below before making a tool decision.
- If the 'ADDITIONAL CONTEXT FROM KNOWLEDGE BASE' fully and accurately answers the 'User query', choose 'none' for the tool.
- Otherwise, if your general knowledge is sufficient, choose 'none'.
- Use tools like '${example_tool}' for time-sensitive information (e.g., current prices, news), real-time data, or specifics not in your training or the provided context.
{{#if rag_context}}

ADDITIONAL CONTEXT FROM KNOWLEDGE BASE (Consider this before deciding on a tool):
---
${rag_context}
---
{{/if}}

User query: "${original_user_query}"

Considering the user query, tools, instructions, and any additional context, do you need to use a tool? Or is the provided context/your general knowledge sufficient?
Respond ONLY with a JSON object specifying the "tool_name" (e.g., "${example_tool}", or "none" if no tool is needed) and, if a tool is chosen, an "arguments" object for that tool. Example for tool use: {"tool_name": "${example_tool}", "arguments": ${example_arguments}}. Example for no tool: {"tool_name": "none"}."""  # noqa: E501

STRICT_CONTEXT = """SYSTEM INSTRUCTION: You are in STRICT CONTEXT-ONLY MODE. Your primary goal is to answer the user's query using ONLY the "Context from Knowledge Base" provided. Do not use any external knowledge or your general training data. If the context does not contain the answer, explicitly state that the information is not available in the provided context.
ROLE: You are ${assistant_name}, an assistant that answers strictly from the provided text.
Context from Knowledge Base:
---
${rag_context}
---
Original Query:
${original_user_query}
Your answer (ONLY from the context provided):"""  # noqa: E501

GENERAL_KNOWLEDGE = """SYSTEM INSTRUCTION: You are ${assistant_name}. Please provide a helpful and concise answer to the following user query based on your general knowledge.
User Query:
"${original_user_query}"

Based on this, provide a direct answer."""  # noqa: E501

POST_TOOL = """User query: "${original_user_query}"
I used the '${effective_tool_name}' tool and received the following information:
${tool_output}
Based on this information, please provide a concise answer to the user's query. If the information is an error message, explain the error. If the information is complex, summarize it. Respond directly to the user."""  # noqa: E501

# Not in spec 001 (which only names topic accumulation in spec 000): a short call that
# folds the new message into the conversation's running topic.
TOPIC_UPDATE = """You maintain the running topic of a conversation so that follow-up questions can be searched without their pronouns.
Current topic: "${current_topic}"
New user message: "${user_message}"
Reply with the updated topic only: one short line naming the subjects, with pronouns replaced by what they refer to. No explanation."""  # noqa: E501

# Spec 003 (PromptTemplates.formatPrompt): alert title, resource details, metrics and
# logs, the retrieved runbook chunks, and a request for JSON output.
CHECKLIST = """You are ${assistant_name}, an SRE assistant. Build a prioritized troubleshooting checklist for the alert below, using the runbook excerpts where they apply.

ALERT
Title: ${alert_title}
Resource: ${resource_type} (shape: ${resource_shape})
Labels/tags: ${labels}
Metrics:
${metrics}
Logs:
${logs}

RUNBOOK EXCERPTS
${runbook_chunks}

Respond ONLY with a JSON object of this form:
{"title": "<short checklist title>", "steps": [{"order": 1, "priority": "high|medium|low", "action": "<what to do>", "rationale": "<why>", "source": "<runbook path or 'general'>"}]}"""  # noqa: E501

DEFAULTS: dict[str, str] = {
    "tool_decision": TOOL_DECISION,
    "strict_context": STRICT_CONTEXT,
    "general_knowledge": GENERAL_KNOWLEDGE,
    "post_tool": POST_TOOL,
    "topic_update": TOPIC_UPDATE,
    "checklist": CHECKLIST,
}
PROMPT_NAMES = tuple(DEFAULTS)
OVERRIDE_KEY = "prompts"
"""Collection metadata key holding per-collection prompt templates."""
PROFILE_KEY = "prompt_profile"
"""Collection metadata key naming the collection's prompt profile (setting
``prompt_profile`` otherwise)."""

# The "small" profile (issue 36 item 5): for sub-1B chat models, which lose the question
# in spec 001's long instructions and pay for every prompt token on a CPU. Same flow, same
# placeholders; the tool decision is told that the knowledge base has documents instead of
# being shown them (the answer call shows them) and gets no tool call to imitate (SmolLM2
# copied spec 001's example call, arguments and all, on most book questions: it searched
# "latest Bitcoin news"), and the answer prompt is short, puts the question last and asks
# for the context's own commands.
SMALL_TOOL_DECISION = """Tools:
${tool_descriptions}
{{#if rag_context}}
The knowledge base has documents for this query, so no tool is needed.
{{/if}}
User query: "${original_user_query}"
Reply with JSON only. Reply {"tool_name": "none"} unless the query asks for current news or a web page; then give "tool_name" and its "arguments" for this query."""  # noqa: E501

SMALL_STRICT_CONTEXT = """Answer the question from these documents only. Use their commands and code exactly as written. If they do not contain the answer, say that the documents do not say.

${rag_context}

Question: ${original_user_query}
Answer:"""  # noqa: E501

SMALL_GENERAL_KNOWLEDGE = """You are ${assistant_name}. Answer briefly.
Question: ${original_user_query}
Answer:"""


@dataclass(frozen=True)
class PromptProfile:
    """Templates and context sizes for a kind of chat model; ``None``: the settings'."""

    name: str
    templates: Mapping[str, str] = field(default_factory=dict)
    context_limit: int | None = None
    """documents per turn (instead of ``chat_context_limit``)"""
    chunk_chars: int | None = None
    """each document's text cut to about this many characters"""
    max_tokens: int | None = None
    """answer length cap (at most ``llm_max_tokens``)"""


PROFILES: dict[str, PromptProfile] = {
    "spec": PromptProfile("spec"),
    "small": PromptProfile(
        "small", {"tool_decision": SMALL_TOOL_DECISION, "strict_context": SMALL_STRICT_CONTEXT,
                  "general_knowledge": SMALL_GENERAL_KNOWLEDGE},
        context_limit=2, chunk_chars=1200, max_tokens=256),
}


def profile_for(default: str, collection_metadata: Mapping[str, Any] | None) -> PromptProfile:
    """The collection's ``prompt_profile``, else ``default`` (the setting)."""
    name = (collection_metadata or {}).get(PROFILE_KEY) or default
    if not isinstance(name, str) or name not in PROFILES:
        raise InvalidInput(f"Unknown prompt profile {name!r} in collection metadata "
                           f"'{PROFILE_KEY}' (known: {', '.join(PROFILES)})")
    return PROFILES[name]


def clip(text: str, chars: int | None) -> str:
    """``text`` cut to about ``chars`` characters at a line or word end (``None``: whole)."""
    if chars is None or len(text) <= chars:
        return text
    cut = text[:chars]
    end = max(cut.rfind("\n"), cut.rfind(" "))
    return (cut[:end] if end > chars // 2 else cut).rstrip() + " ..."

_IF = re.compile(r"\{\{#if (\w+)\}\}(.*?)\{\{/if\}\}", re.DOTALL)


def render(template: str, **values: Any) -> str:
    """Fill a template: conditional blocks first, then ``${name}`` placeholders.

    Values are inserted verbatim (a ``${x}`` inside a user's message stays as typed,
    because substitution is a single pass).
    """
    text = _IF.sub(lambda m: m.group(2) if values.get(m.group(1)) else "", template)
    try:
        return string.Template(text).substitute(
            {k: "" if v is None else str(v) for k, v in values.items()})
    except KeyError as exc:
        raise InvalidInput(f"Prompt template uses unknown placeholder ${{{exc.args[0]}}}") from None
    except ValueError as exc:
        raise InvalidInput(f"Invalid prompt template: {exc}") from None


SPEC_EXAMPLE_TOOL = "search_engine"
SPEC_EXAMPLE_QUERY = "latest Bitcoin news"


def tool_example(tools: Mapping[str, Mapping[str, Any]] | None) -> tuple[str, dict[str, Any]]:
    """The tool the decision prompt's example names, and its arguments: spec 001's
    ``search_engine`` with ``{"query": "latest Bitcoin news"}`` when it is registered (or
    no tool list is given); otherwise a registered tool, one taking a ``query`` first,
    its required string arguments filled with the same example words."""
    if tools is None or SPEC_EXAMPLE_TOOL in tools or not tools:
        return SPEC_EXAMPLE_TOOL, {"query": SPEC_EXAMPLE_QUERY}
    ordered = sorted(tools, key=lambda n: ("query" not in tools[n].get("properties", {}), n))
    name = ordered[0]
    schema = tools[name]
    props = schema.get("properties", {})
    args: dict[str, Any] = {}
    for arg in schema.get("required", []) or list(props)[:1]:
        kind = props.get(arg, {}).get("type", "string")
        args[arg] = (SPEC_EXAMPLE_QUERY if arg == "query" else "https://example.com/news"
                     if arg == "url" else 1 if kind == "integer" else SPEC_EXAMPLE_QUERY)
    return name, args


def overrides(collection_metadata: Mapping[str, Any] | None) -> dict[str, str]:
    """The ``prompts`` override of a collection, validated."""
    raw = (collection_metadata or {}).get(OVERRIDE_KEY)
    if raw is None:
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raise InvalidInput("Collection metadata 'prompts' is not valid JSON") from None
    if not isinstance(raw, Mapping):
        raise InvalidInput("Collection metadata 'prompts' must be an object")
    unknown = sorted(set(raw) - set(DEFAULTS))
    if unknown:
        raise InvalidInput(f"Unknown prompt name(s) in collection metadata 'prompts': "
                           f"{', '.join(unknown)} (known: {', '.join(PROMPT_NAMES)})")
    bad = [k for k, v in raw.items() if not isinstance(v, str) or not v.strip()]
    if bad:
        raise InvalidInput(f"Prompt override(s) {', '.join(bad)} must be non-empty strings")
    return dict(raw)


class Prompts:
    """The prompts for one request: defaults, a collection's overrides on top."""

    def __init__(self, assistant_name: str,
                 collection_metadata: Mapping[str, Any] | None = None,
                 profile: PromptProfile | None = None) -> None:
        self.assistant_name = assistant_name
        self.profile = profile or PROFILES["spec"]
        self.templates = {**DEFAULTS, **self.profile.templates,
                          **overrides(collection_metadata)}

    def format(self, name: str, **values: Any) -> str:
        return render(self.templates[name], assistant_name=self.assistant_name, **values)

    def tool_decision(self, tool_descriptions: str, rag_context: str | None,
                      original_user_query: str,
                      tools: Mapping[str, Mapping[str, Any]] | None = None) -> str:
        """``tools``: name → the tool's argument schema (for the example); None keeps
        spec 001's ``search_engine`` example."""
        name, args = tool_example(tools)
        return self.format("tool_decision", tool_descriptions=tool_descriptions,
                           rag_context=rag_context, original_user_query=original_user_query,
                           example_tool=name,
                           example_arguments=json.dumps(args, ensure_ascii=False))

    def strict_context(self, rag_context: str, original_user_query: str) -> str:
        return self.format("strict_context", rag_context=rag_context,
                           original_user_query=original_user_query)

    def general_knowledge(self, original_user_query: str) -> str:
        return self.format("general_knowledge", original_user_query=original_user_query)

    def post_tool(self, original_user_query: str, effective_tool_name: str,
                  tool_output: Any) -> str:
        return self.format("post_tool", original_user_query=original_user_query,
                           effective_tool_name=effective_tool_name,
                           tool_output=json.dumps(tool_output, ensure_ascii=False,
                                                  default=str))

    def topic_update(self, current_topic: str, user_message: str) -> str:
        return self.format("topic_update", current_topic=current_topic,
                           user_message=user_message)
