"""Markdown and MDX sources with YAML frontmatter (Docusaurus convention).

Frontmatter becomes filterable metadata (spec 004 FR-002). A broken
frontmatter block must not lose the lesson: it is logged with the file name,
the defaults apply (spec 004: ``proficiency_level=A2``, ``hardware_tier=1``)
and the body is still ingested.

Document structure (headings, fenced code, tables) comes from ``markdown-it-py``
(CommonMark plus GFM tables) through :func:`markdown_outline`, not from
regular expressions: setext headings (``Title\n===``), ATX headings indented by
up to three spaces and tables without a leading pipe are found the way a
Markdown renderer finds them, and a ``# comment`` inside code is never a
heading. The outline only gives line ranges; chunk text is always cut from the
source lines, so what is embedded reads exactly as the author wrote it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

import yaml
from markdown_it import MarkdownIt

from ragline.ingest.budgets import DEFAULT_LIMITS, ParserLimits, load_frontmatter_yaml
from ragline.ingest.metadata import merge_metadata, normalize_metadata
from ragline.ingest.text import decode_bytes
from ragline.ingest.types import MetadataValue, ParsedContent

log = logging.getLogger(__name__)

# libyaml's loader when PyYAML was built with it: 10x faster on a large book.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_FRONTMATTER_RE = re.compile(r"\A---[ \t]*\n(.*?)^(?:---|\.\.\.)[ \t]*$\n?", re.S | re.M)
FENCE_RE = re.compile(r"^\s*(`{3,}|~{3,})")
_MDX_ESM_RE = re.compile(r"^(?:import|export)\s")
_MDX_JSX_LINE_RE = re.compile(r"^\s*(?:</?[A-Z][\w.]*(?:\s[^<>]*)?/?>\s*)+$")
_MDX_COMMENT_RE = re.compile(r"\{/\*.*?\*/\}", re.S)


# CommonMark + GFM tables. Inline parsing is off: only block structure is needed
# (a heading's inline token still carries its raw text), and it is most of the cost.
_MD = MarkdownIt("commonmark").enable("table").disable("inline")


@dataclass(frozen=True, slots=True)
class Heading:
    """A top-level heading: source lines ``[start, end)``, level 1-6, raw inline title."""

    start: int
    end: int
    level: int
    title: str


@dataclass(slots=True)
class Outline:
    """Where the structure of a Markdown text is, as 0-based line ranges.

    ``headings`` are top-level headings only (one inside a list item or a
    quote does not open a section). ``blocks`` are ``(start, end, kind)``
    ranges of fenced code (``"code"``) and tables (``"table"``) at any nesting
    depth, in order: the chunker keeps them whole.
    """

    headings: list[Heading] = field(default_factory=list)
    blocks: list[tuple[int, int, str]] = field(default_factory=list)


def markdown_outline(text: str) -> Outline:
    """Parse ``text`` with markdown-it-py and return its :class:`Outline`.

    Line numbers index ``text.split("\n")`` (newlines must already be
    normalised to ``\n``, which :func:`decode_bytes` does).
    """
    outline = Outline()
    tokens = _MD.parse(text)
    for i, token in enumerate(tokens):
        if token.map is None:
            continue
        start, end = token.map
        if token.type == "heading_open" and token.level == 0:
            inline = tokens[i + 1] if i + 1 < len(tokens) else None
            title = inline.content if inline is not None and inline.type == "inline" else ""
            title = " ".join(title.split())  # a multi-line setext title reads as one line
            outline.headings.append(Heading(start, end, int(token.tag[1:]), title))
        elif token.type == "fence":
            outline.blocks.append((start, end, "code"))
        elif token.type == "table_open":
            outline.blocks.append((start, end, "table"))
    return outline


def fence_mask(lines: list[str]) -> list[bool]:
    """For each line, whether it belongs to a fenced code block (fences included).

    Headings, MDX statements and tables are only recognised outside code, where
    a ``# comment`` in a bash block is not a title.
    """
    mask: list[bool] = []
    fence: str | None = None
    for line in lines:
        m = FENCE_RE.match(line)
        if fence is None:
            if m:
                fence = m.group(1)
            mask.append(fence is not None)
        else:
            mask.append(True)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and (
                line.strip() == m.group(1)
            ):
                fence = None
    return mask


def split_frontmatter(text: str, name: str = "") -> tuple[str | None, str]:
    """``(raw_yaml, body)``; ``raw_yaml`` is ``None`` when there is no frontmatter."""
    if not re.match(r"---[ \t]*\n", text):
        return None, text
    m = _FRONTMATTER_RE.match(text)
    if m is None:
        log.warning("%s: frontmatter is not terminated by '---'; ingesting it as text", name)
        return None, text
    return m.group(1), text[m.end() :]


def parse_frontmatter(raw: str | None, name: str = "") -> dict[str, Any]:
    """YAML → dict, or ``{}`` with a warning naming the file when it is malformed.

    Raises :class:`~ragline.errors.InvalidInput` naming the limit when the YAML is over
    a budget of :mod:`ragline.ingest.budgets` (an alias bomb): the file is refused.
    """
    if raw is None or not raw.strip():
        return {}
    try:
        data = load_frontmatter_yaml(raw, name, _YAML_LOADER)  # a safe loader (C or Python)
    except yaml.YAMLError as exc:
        reason = str(exc).splitlines()[0]
        log.warning("%s: malformed frontmatter (%s); using defaults", name, reason)
        return {}
    if not isinstance(data, dict):
        log.warning("%s: frontmatter is not a mapping; using defaults", name)
        return {}
    return data


def strip_mdx(text: str) -> str:
    """Drop what MDX adds to Markdown and keep the prose between components.

    Removed, outside code blocks: ``import``/``export`` statements (up to the
    next blank line, as MDX defines an ESM block), lines holding only JSX tags
    (``<Tabs>``, ``<TabItem value="py">``, ``<Figure src={x} />``) and
    ``{/* comments */}``. Lower-case HTML tags are kept: they are ordinary
    Markdown.
    """
    text = _MDX_COMMENT_RE.sub("", text)
    lines = text.split("\n")
    mask = fence_mask(lines)
    out: list[str] = []
    in_esm = False
    for line, in_code in zip(lines, mask, strict=True):
        if in_code:
            in_esm = False
            out.append(line)
        elif in_esm or _MDX_ESM_RE.match(line):
            in_esm = bool(line.strip())
        elif not _MDX_JSX_LINE_RE.match(line) and (line.strip() or (out and out[-1].strip())):
            out.append(line)  # blank lines left by removed ones collapse into one
    return "\n".join(out)


def first_heading(text: str, outline: Outline | None = None) -> str | None:
    """Text of the first level-1 heading (``# H1`` or setext ``===``) outside code."""
    for heading in (outline or markdown_outline(text)).headings:
        if heading.level == 1 and heading.title:
            return heading.title
    return None


def parse_markdown(
    data: bytes, name: str, base: Mapping[str, MetadataValue] | None = None, *,
    limits: ParserLimits = DEFAULT_LIMITS,
) -> ParsedContent:
    """Parse a ``.md``/``.mdx`` file: frontmatter → metadata, body → text.

    ``base`` holds the lower-priority metadata (defaults, then path fields);
    frontmatter values override it (see :func:`merge_metadata`). The title is
    the frontmatter ``title``, else the first ``#`` heading; if neither exists
    the loader falls back to the file stem. ``limits`` (the HTML and PDF budgets) has
    nothing to bound here: the frontmatter has budgets of its own.
    """
    text = decode_bytes(data, name)
    raw, body = split_frontmatter(text, name)
    front = parse_frontmatter(raw, name)
    title_value = front.pop("title", None)
    if PurePosixPath(name).suffix.lower() == ".mdx":
        body = strip_mdx(body)
    title = str(title_value).strip() if title_value is not None else None
    return ParsedContent(
        text=body.strip("\n"),
        source_type="md",
        text_format="markdown",
        title=title or first_heading(body),
        metadata=merge_metadata(base or {}, normalize_metadata(front, name), name=name),
    )
