"""Spec 000's hybrid query strategy: which text a turn searches with, and the running topic.

* ``currentTopic`` empty or whitespace -> the user's message, logged as
  ``first message (raw query)``;
* otherwise the topic, updated with the new message and normalized, logged as
  ``follow-up (contextualized topic)``: "Does it integrate with OpenShift AI?"
  after a turn about InstructLab searches for InstructLab *and* OpenShift AI.

The update is a short LLM call (prompt ``topic_update``); when there is no model
or the call fails, :func:`fallback_topic` folds the message's content words into
the topic deterministically.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass

from ragline.errors import ProviderError
from ragline.prompts import Prompts
from ragline.providers.llms.base import ChatModel

log = logging.getLogger(__name__)

FIRST = "first message (raw query)"
FOLLOW_UP = "follow-up (contextualized topic)"
MAX_TOPIC_CHARS = 300
MAX_TOPIC_WORDS = 30

_STOP_WORDS = """a an the and or but if then so of to in on at by for with from into about as
is are was were be been being do does did done have has had can could should would will shall
may might must it its it's this that these those there here he she they them him her his their
theirs we us our you your i me my mine what which who whom whose when where why how tell please
more also some any not no yes just very really than too much many"""
_STOP = frozenset(_STOP_WORDS.split())
_WORD = re.compile(r"[\w][\w.\-+/#]*", re.UNICODE)


def normalize_topic(text: str) -> str:
    """One line, no surrounding quotes or label, collapsed spaces, bounded length."""
    line = next((ln for ln in text.strip().splitlines() if ln.strip()), "")
    line = re.sub(r"^(updated\s+)?topic\s*:\s*", "", line.strip(), flags=re.IGNORECASE)
    line = " ".join(line.strip(" \"'`*").split())
    return line[:MAX_TOPIC_CHARS].rstrip()


def content_words(text: str) -> list[str]:
    return [w.rstrip(".-") for w in _WORD.findall(text) if w.lower() not in _STOP]


def fallback_topic(current: str, message: str) -> str:
    """Current topic words, then the message's new content words (deduplicated, capped)."""
    seen: set[str] = set()
    words: list[str] = []
    for w in content_words(current) + content_words(message):
        if w and w.lower() not in seen:
            seen.add(w.lower())
            words.append(w)
    return normalize_topic(" ".join(words[-MAX_TOPIC_WORDS:]))


def history_topic(user_messages: list[str]) -> str:
    """The running topic of a conversation a client sent whole (``/v1/chat/completions``):
    the first user message, then each later one folded in by :func:`fallback_topic`.
    Deterministic and free: replaying the ``topic_update`` call for every earlier turn
    would cost one model call per turn on every request. Empty without earlier turns, so
    the turn is a ``first message (raw query)``."""
    topic = ""
    for message in user_messages:
        if not message.strip():
            continue
        topic = fallback_topic(topic, message) if topic else (normalize_topic(message)
                                                                or message.strip())
    return topic


@dataclass
class QueryPlan:
    query: str
    strategy: str
    topic: str  # the topic stored after this turn


async def plan_query(current_topic: str, message: str, llm: ChatModel | None,
                     prompts: Prompts) -> tuple[QueryPlan, float]:
    """The search text and strategy of a turn, and the LLM seconds spent on it."""
    llm_s = 0.0
    if not current_topic.strip():
        topic = normalize_topic(message) or message.strip()
        plan = QueryPlan(message, FIRST, topic)
    else:
        topic = ""
        if llm is not None:
            t0 = time.perf_counter()
            try:
                topic = normalize_topic(await llm.complete(
                    [{"role": "user", "content": prompts.topic_update(current_topic, message)}],
                    max_tokens=48))
            except ProviderError as exc:
                log.warning("topic update call failed (%s); using the fallback topic",
                            exc.message)
            llm_s = time.perf_counter() - t0
        if not topic:
            topic = fallback_topic(current_topic, message)
        plan = QueryPlan(topic, FOLLOW_UP, topic)
    log.info("RAG query strategy: %s", plan.strategy)
    return plan, llm_s
