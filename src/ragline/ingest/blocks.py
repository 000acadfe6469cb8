"""Cutting a document into sections and size-bounded pieces for the chunker.

A *section* is the text under one Markdown heading (``##`` and deeper; the
``#`` heading is the document title and opens no path). A section is made of
*blocks* — paragraphs, headings, fenced code blocks, tables (their line ranges
come from :func:`ragline.ingest.markdown.markdown_outline`) — and blocks are
turned into *pieces* no larger than a token limit. Code blocks and tables that
fit are one atomic piece, so the chunker never cuts them; larger ones are cut
at line or row boundaries and every part is re-fenced (or gets the table
header again), so each part is still valid Markdown. Prose is cut by the
recursive splitter: lines → sentences → words → characters (plain text tries
sentences before lines, because PDF lines are visual line breaks).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ragline.ingest.markdown import FENCE_RE, markdown_outline

TokenCounter = Callable[[str], int]

_LINES = re.compile(r"(\n+)")
_SENTENCES = re.compile(r"((?<=[.!?])[\"')\]]*\s+)")
_WORDS = re.compile(r"(\s+)")
MARKDOWN_SEPARATORS = (_LINES, _SENTENCES, _WORDS)
PLAIN_SEPARATORS = (_SENTENCES, _LINES, _WORDS)
_PARAGRAPHS = re.compile(r"\n[ \t]*\n\s*")
_TABLE_SEPARATOR_RE = re.compile(r"^\s*\|?\s*:?-+")
_ANCHOR_RE = re.compile(r"\s*\{#([^}]+)\}\s*$")
_THEMATIC_BREAK_RE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")


@dataclass(slots=True)
class Block:
    """A paragraph, heading, code block or table, with the page it starts on."""

    text: str
    kind: str = "text"  # text | heading | code | table
    page: int | None = None


@dataclass(slots=True)
class Section:
    """Blocks under one heading; ``heading_path`` excludes the ``#`` title."""

    heading_path: list[str]
    anchor: str | None = None
    blocks: list[Block] = field(default_factory=list)


@dataclass(slots=True)
class Piece:
    """A unit the chunker packs; ``sep`` is the text that joined it to its predecessor."""

    text: str
    tokens: int
    page: int | None = None
    atomic: bool = False
    heading: bool = False
    sep: str = "\n\n"


def _blocks(
    lines: list[str], start: int, end: int, spans: dict[int, tuple[int, str]]
) -> list[Block]:
    """Blocks of lines ``[start, end)``: code and tables whole, prose by blank lines.

    ``spans`` maps the first line of each fenced code block or table (from the
    Markdown outline) to its end and kind. Prose between them is grouped at
    blank lines, as before the outline existed, so chunk texts (and ids) of
    ordinary documents did not change.
    """
    blocks: list[Block] = []
    buf: list[str] = []

    def flush(kind: str = "text") -> None:
        if len(buf) == 1 and kind == "text" and _THEMATIC_BREAK_RE.match(buf[0]):
            buf.clear()  # a `---` rule separates visually and means nothing to a search
        if any(line.strip() for line in buf):
            blocks.append(Block("\n".join(buf).strip("\n"), kind))
        buf.clear()

    i = start
    while i < end:
        span = spans.get(i)
        if span is not None:
            flush()
            stop, kind = min(span[0], end), span[1]
            buf.extend(lines[i:stop])
            flush(kind)
            i = stop
            continue
        if lines[i].strip():
            buf.append(lines[i])
        else:
            flush()
        i += 1
    flush()
    return blocks


def markdown_sections(text: str) -> list[Section]:
    """Split Markdown into sections at its top-level headings (see :func:`markdown_outline`).

    The heading's lines are the first block of its section, so the first chunk
    of a section reads as it does in the source.
    """
    lines = text.split("\n")
    outline = markdown_outline(text)
    spans = {s: (e, kind) for s, e, kind in outline.blocks}
    sections: list[Section] = []

    def close(section: Section, heading: Block | None, start: int, end: int) -> None:
        section.blocks = ([heading] if heading else []) + _blocks(lines, start, end, spans)
        if section.blocks:
            sections.append(section)

    stack: list[tuple[int, str]] = []
    current, heading, start = Section(heading_path=[]), None, 0
    for h in outline.headings:
        close(current, heading, start, h.start)
        anchor = _ANCHOR_RE.search(h.title)
        title = _ANCHOR_RE.sub("", h.title)
        stack = [] if h.level == 1 else [x for x in stack if x[0] < h.level] + [(h.level, title)]
        current = Section([t for _, t in stack], anchor.group(1) if anchor else None)
        heading = Block("\n".join(lines[h.start : h.end]).strip(), "heading")
        start = h.end
    close(current, heading, start, len(lines))
    return sections


def plain_sections(text: str, pages: list[tuple[int, str]] | None = None) -> list[Section]:
    """One section of paragraphs; with ``pages``, each paragraph knows its page."""
    section = Section(heading_path=[])
    for page, page_text in pages if pages else [(None, text)]:
        for para in _PARAGRAPHS.split(page_text.strip()):
            if para.strip():
                section.blocks.append(Block(para.strip(), "text", page))
    return [section] if section.blocks else []


def split_text(
    text: str, limit: int, count: TokenCounter, separators: tuple[re.Pattern[str], ...]
) -> list[tuple[str, str]]:
    """``[(separator_before, part)]`` with every part within ``limit`` tokens.

    Only parts that are still too large are split again with the next, finer
    separator; a single word over the limit is cut by characters.
    """
    if count(text) <= limit:
        return [("", text)]
    for i, pattern in enumerate(separators):
        bits = pattern.split(text)
        if len(bits) < 3:
            continue
        out: list[tuple[str, str]] = []
        sep = ""
        for j in range(0, len(bits), 2):
            if bits[j]:
                sub = split_text(bits[j], limit, count, separators[i + 1 :])
                out.append((sep, sub[0][1]))
                out.extend(sub[1:])
                sep = ""
            if j + 1 < len(bits):
                sep += bits[j + 1]
        return out
    return _split_chars(text, limit, count)


def _split_chars(text: str, limit: int, count: TokenCounter) -> list[tuple[str, str]]:
    """Last resort for a token-dense run without whitespace (URLs, base64)."""
    out: list[tuple[str, str]] = []
    while text:
        lo, hi = 1, len(text)
        while lo < hi:  # longest prefix within the limit
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if count(text[:mid]) <= limit else (lo, mid - 1)
        out.append(("", text[:lo]))
        text = text[lo:]
    return out


def _group_lines(
    lines: list[str], fixed: int, limit: int, count: TokenCounter
) -> list[list[str]]:
    """Consecutive lines in groups of even size, each with ``fixed`` within ``limit``.

    Even sizes: a 300-token code block under a 256 limit becomes two halves,
    not a full part and a scrap.
    """
    sizes = [count(line) for line in lines]
    room = max(1, limit - fixed)
    soft = math.ceil(sum(sizes) / max(1, math.ceil(sum(sizes) / room)))
    groups: list[list[str]] = [[]]
    size = 0
    for line, tokens in zip(lines, sizes, strict=True):
        if groups[-1] and (size + tokens > room or size + tokens / 2 > soft):
            groups.append([])
            size = 0
        groups[-1].append(line)
        size += tokens
    return [g for g in groups if g]


def _split_code(text: str, limit: int, count: TokenCounter) -> list[str]:
    """An oversized fenced block cut at line boundaries, each part fenced again."""
    lines = text.split("\n")
    opening = lines[0]
    m = FENCE_RE.match(opening)
    closing = opening[: m.end()] if m else "```"
    if len(lines) > 1 and lines[-1].strip() and set(lines[-1].strip()) <= set("`~"):
        closing, lines = lines[-1], lines[:-1]
    body = lines[1:]
    fixed = count(opening) + count(closing)
    parts: list[str] = []
    for group in _group_lines(body, fixed, limit, count):
        if fixed + sum(count(line) for line in group) > limit:  # one very long line
            words = split_text("\n".join(group), max(1, limit - fixed), count, (_WORDS,))
            group = [part for _, part in words]
            parts.extend(f"{opening}\n{part}\n{closing}" for part in group)
            continue
        parts.append("\n".join([opening, *group, closing]))
    return parts


def _split_table(text: str, limit: int, count: TokenCounter) -> list[str]:
    """An oversized table cut between rows, each part repeating the header rows."""
    lines = text.split("\n")
    header = lines[:2] if len(lines) > 1 and _TABLE_SEPARATOR_RE.match(lines[1]) else []
    rows = lines[len(header) :]
    fixed = sum(count(line) for line in header)
    if fixed * 2 > limit:  # the header alone would crowd out the rows
        header, rows, fixed = [], lines, 0
    return ["\n".join(header + group) for group in _group_lines(rows, fixed, limit, count)]


def section_pieces(
    section: Section,
    count: TokenCounter,
    *,
    atomic_limit: int,
    prose_limit: int,
    separators: tuple[re.Pattern[str], ...],
) -> list[Piece]:
    """Pieces of a section: blocks that fit stay whole; larger ones are split.

    Code and tables up to ``atomic_limit`` tokens (the chunk target) stay
    whole; prose is split to ``prose_limit`` (target minus overlap) so any
    prose piece fits after an overlap.
    """
    pieces: list[Piece] = []
    for block in section.blocks:
        tokens = count(block.text)
        atomic = block.kind in ("code", "table")
        if tokens <= (atomic_limit if atomic else prose_limit):
            pieces.append(Piece(block.text, tokens, block.page, atomic, block.kind == "heading"))
            continue
        if atomic:
            splitter = _split_code if block.kind == "code" else _split_table
            for part in splitter(block.text, prose_limit, count):
                tokens = count(part)
                if tokens <= prose_limit:
                    pieces.append(Piece(part, tokens, block.page, atomic=True))
                    continue
                # a single row or line over the limit (e.g. a long |---| rule): words, then chars
                for sep, sub in split_text(part, prose_limit, count, (_WORDS,)):
                    pieces.append(Piece(sub, count(sub), block.page, sep=sep or "\n"))
            continue
        for i, (sep, part) in enumerate(split_text(block.text, prose_limit, count, separators)):
            pieces.append(Piece(part, count(part), block.page, sep="\n\n" if i == 0 else sep))
    return pieces
