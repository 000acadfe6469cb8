"""Header-aware, token-sized chunks with overlap (spec 004 FR-004/005, hermitAI 2.2).

How a document becomes chunks:

1. Sections: Markdown is split at ``##``-and-deeper headings (their titles
   form ``heading_path``; ``#`` is the document title). Plain text and PDFs
   are one section of paragraphs, each paragraph knowing its page.
2. Pieces: blocks that fit stay whole; code blocks and tables up to
   ``target_tokens`` are never cut; larger blocks are split (see
   :mod:`ragline.ingest.blocks`).
3. Packing, per section: pieces are packed into chunks of at most
   ``target_tokens``, balanced so that a section slightly over the target
   gives two even chunks rather than a full one and a scrap. Each chunk after
   the first of a section starts with the last ``overlap * target_tokens`` tokens of
   the previous one (whole sentences when they fill at least half of that,
   else words; never part of a code block or table).
4. Merging: a chunk under ``min_tokens`` joins a neighbour when the result
   fits the target: its section's previous chunk if it is a section's tail,
   else the next chunk (a heading directly followed by a sub-heading joins
   its first sub-section), else the previous one.

Sizes are measured with the ``count_tokens`` callback, which should count
content tokens without special tokens (``[CLS]``/``[SEP]``), using the
embedding model's tokenizer. Everything is deterministic, so unchanged
sections produce identical chunks (and ids) when another section changes.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass, field

from ragline.errors import InvalidInput
from ragline.ingest.blocks import (
    MARKDOWN_SEPARATORS,
    PLAIN_SEPARATORS,
    Piece,
    Section,
    TokenCounter,
    markdown_sections,
    plain_sections,
    section_pieces,
)
from ragline.ingest.ids import content_hash
from ragline.ingest.types import Chunk, SourceDocument

ROOT_SECTION_ID = "root"
"""``section_id`` of text under no ``##`` heading (the intro, or a whole PDF)."""

_SENTENCE_START = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=\S)")
_WORD_START = re.compile(r"\s+(?=\S)")


@dataclass(slots=True)
class _Draft:
    section: int
    body: list[Piece]
    overlap: list[Piece] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return sum(p.tokens for p in self.overlap) + sum(p.tokens for p in self.body)

    @property
    def headings_only(self) -> bool:
        return all(p.heading for p in self.body)

    def text(self) -> str:
        pieces = self.overlap + self.body
        return pieces[0].text + "".join(p.sep + p.text for p in pieces[1:])


def slugify(text: str) -> str:
    """ASCII slug: ``"Setting up ROS 2!"`` → ``"setting-up-ros-2"``."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")


def section_ids(sections: list[Section]) -> list[str]:
    """Slug of each heading path (``setup/install``), made unique with ``-2``, ``-3``."""
    seen: dict[str, int] = {}
    ids: list[str] = []
    for section in sections:
        if not section.heading_path:
            base = ROOT_SECTION_ID
        else:
            slugs = [slugify(h) or "section" for h in section.heading_path]
            if section.anchor:
                slugs[-1] = slugify(section.anchor) or slugs[-1]
            base = "/".join(slugs)
        seen[base] = seen.get(base, 0) + 1
        ids.append(base if seen[base] == 1 else f"{base}-{seen[base]}")
    return ids


def _tail(piece: Piece, budget: int, count: TokenCounter) -> Piece | None:
    """The longest ending of ``piece`` within ``budget`` tokens, cut at a sentence or word."""
    text = piece.text
    for pattern, floor in ((_SENTENCE_START, budget / 2), (_WORD_START, 1)):
        starts = [m.end() for m in pattern.finditer(text)]
        lo, hi = 0, len(starts)  # first start whose tail fits
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if count(text[starts[mid] :]) <= budget else (mid + 1, hi)
        if lo < len(starts):
            tail = text[starts[lo] :]
            tokens = count(tail)
            if tokens >= floor:
                return Piece(tail, tokens, piece.page, heading=piece.heading)
    return None


def _overlap(body: list[Piece], budget: int, count: TokenCounter) -> list[Piece]:
    """Trailing pieces of ``body`` (whole, or the tail of one) within ``budget``."""
    budget = min(budget, sum(p.tokens for p in body) // 2)
    half, taken = budget / 2, list[Piece]()
    for piece in reversed(body):
        if piece.tokens <= budget:
            taken.insert(0, piece)
            budget -= piece.tokens
            continue
        # A partial piece only when whole ones leave the overlap under half full:
        # starting the next chunk mid-sentence is worth it only to get context at all.
        if not piece.atomic and budget >= half and (tail := _tail(piece, budget, count)):
            taken.insert(0, tail)
        break
    return taken


def _pack(
    section: int, pieces: list[Piece], target: int, ov: int, count: TokenCounter
) -> list[_Draft]:
    """Balanced greedy packing of one section's pieces into drafts."""
    total = sum(p.tokens for p in pieces)
    if total <= target:
        return [_Draft(section, pieces)]
    n = 1 + math.ceil((total - target) / max(1, target - ov))
    soft = math.ceil(total / n)
    drafts: list[_Draft] = []
    overlap: list[Piece] = []
    i = 0
    while i < len(pieces):
        size = sum(p.tokens for p in overlap)
        if size + pieces[i].tokens > target:
            overlap, size = [], 0
        body: list[Piece] = [pieces[i]]
        body_size, size, i = pieces[i].tokens, size + pieces[i].tokens, i + 1
        while i < len(pieces) and size + pieces[i].tokens <= target:
            if body_size + pieces[i].tokens / 2 > soft:
                break
            body.append(pieces[i])
            body_size, size, i = body_size + pieces[i].tokens, size + pieces[i].tokens, i + 1
        drafts.append(_Draft(section, body, overlap))
        overlap = _overlap(body, ov, count)
    return drafts


def _merge(first: _Draft, second: _Draft) -> _Draft:
    # second's overlap, if any, repeats the end of first: drop it.
    section = second.section if first.headings_only else first.section
    return _Draft(section, first.body + second.body, first.overlap)


def _merge_small(drafts: list[_Draft], target: int, minimum: int) -> list[_Draft]:
    """Join drafts under ``minimum`` tokens to a neighbour when the result fits."""
    i = 0
    while i < len(drafts):
        draft = drafts[i]
        if draft.tokens >= minimum or len(drafts) == 1:
            i += 1
            continue
        tail = i > 0 and drafts[i - 1].section == draft.section
        sides = ("prev", "next") if tail else ("next", "prev")
        for side in sides:
            j = i - 1 if side == "prev" else i + 1
            if not 0 <= j < len(drafts):
                continue
            a, b = (drafts[j], draft) if side == "prev" else (draft, drafts[j])
            merged = _merge(a, b)
            if merged.tokens <= target:
                lo = min(i, j)
                drafts[lo : lo + 2] = [merged]
                i = lo
                break
        else:
            i += 1
    return drafts


def chunk_document(
    doc: SourceDocument,
    count_tokens: TokenCounter,
    target_tokens: int = 256,
    overlap: float = 0.15,
    min_tokens: int | None = None,
    *,
    markdown: bool | None = None,
) -> list[Chunk]:
    """Cut ``doc`` into chunks as described in the module docstring.

    ``min_tokens`` defaults to a quarter of the target (at least 20).
    ``markdown`` forces or disables header-aware splitting; by default it
    follows ``doc.text_format``. Raises :class:`InvalidInput` for impossible
    settings.
    """
    if target_tokens < 8:
        raise InvalidInput(f"target_tokens must be at least 8, got {target_tokens}")
    if not 0 <= overlap < 0.5:
        raise InvalidInput(f"overlap must be in [0, 0.5), got {overlap}")
    minimum = max(20, target_tokens // 4) if min_tokens is None else min_tokens
    minimum = min(minimum, target_tokens // 2)
    ov = int(target_tokens * overlap)
    structured = doc.text_format == "markdown" if markdown is None else markdown
    sections = markdown_sections(doc.text) if structured else plain_sections(doc.text, doc.pages)
    separators = MARKDOWN_SEPARATORS if structured else PLAIN_SEPARATORS
    drafts: list[_Draft] = []
    for index, section in enumerate(sections):
        pieces = section_pieces(
            section, count_tokens, atomic_limit=target_tokens,
            prose_limit=max(1, target_tokens - ov), separators=separators,
        )  # fmt: skip
        if pieces:
            drafts.extend(_pack(index, pieces, target_tokens, ov, count_tokens))
    drafts = _merge_small(drafts, target_tokens, minimum)
    ids = section_ids(sections)
    chunks: list[Chunk] = []
    for position, draft in enumerate(drafts):
        text = draft.text()
        section = sections[draft.section]
        chunks.append(
            Chunk(
                text=text,
                chunk_index=position,
                section_id=ids[draft.section],
                section_title=section.heading_path[-1] if section.heading_path else doc.title,
                heading_path=list(section.heading_path),
                token_count=count_tokens(text),
                content_hash=content_hash(text),
                page_number=(draft.overlap + draft.body)[0].page,
            )
        )
    return chunks
