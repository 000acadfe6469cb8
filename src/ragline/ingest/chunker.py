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
4. Lead-ins stay with their code: a chunk never ends on a heading or a short
   caption ("Create `setup.py`:") whose code block opens the next chunk of the
   section; the lead-in moves to that chunk when it fits (issue 36).
5. Merging (spec 004 EC-4: chunks under 100 tokens): a chunk under
   ``min_tokens`` joins a neighbour when the result fits the target: its
   section's previous chunk if it is a section's tail, else the next chunk (a
   heading directly followed by a sub-heading joins its first sub-section),
   else the previous one. A section's tail that cannot join (the previous chunk
   is too full) takes pieces from the end of the previous chunk instead, so
   both end up nearer the middle. A merged chunk belongs to the section that
   gave it the most text (its ``heading_path`` and ``section_id``).

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
MIN_TOKENS = 100
"""Spec 004 EC-4: a chunk under 100 tokens is merged with adjacent content."""

_SENTENCE_START = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=\S)")
_WORD_START = re.compile(r"\s+(?=\S)")


@dataclass(slots=True)
class _Draft:
    section: int
    body: list[Piece]
    overlap: list[Piece] = field(default_factory=list)
    parts: dict[int, int] = field(default_factory=dict)
    """Body tokens per section, once drafts of several sections are merged."""

    def shares(self) -> dict[int, int]:
        return self.parts or {self.section: sum(p.tokens for p in self.body)}

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
    parts = dict(first.shares())
    for sec, tokens in second.shares().items():
        parts[sec] = parts.get(sec, 0) + tokens
    # a heading-only draft takes the next one's section; else the section that gave the
    # most text (the first one on a tie)
    section = (second.section if first.headings_only
               else max(parts, key=lambda k: (parts[k], -k)))
    return _Draft(section, first.body + second.body, first.overlap, parts)


_CODE_FENCE = ("```", "~~~")


def _is_code(piece: Piece) -> bool:
    return piece.atomic and piece.text.lstrip().startswith(_CODE_FENCE)


def _lead_in(body: list[Piece], caption_tokens: int) -> int:
    """How many pieces at the end of ``body`` introduce what follows: headings, and a
    short prose piece (a caption) after them or alone; never the whole body."""
    n = 0
    if body and not body[-1].atomic and not body[-1].heading and (
            body[-1].tokens <= caption_tokens):
        n = 1
    while n < len(body) and body[-1 - n].heading:
        n += 1
    return n if n < len(body) else 0


def _keep_lead_ins(drafts: list[_Draft], target: int, ov: int, count: TokenCounter,
                   caption_tokens: int) -> list[_Draft]:
    """Move a draft's closing heading or caption to the next draft of its section when
    that draft opens with the code it introduces."""
    for i in range(len(drafts) - 1):
        a, b = drafts[i], drafts[i + 1]
        if a.section != b.section or a.parts or b.parts or not b.body or not _is_code(b.body[0]):
            continue
        n = _lead_in(a.body, caption_tokens)
        if not n:
            continue
        lead = a.body[-n:]
        body = lead + b.body
        if sum(p.tokens for p in body) > target:
            continue  # the code fills the chunk: no room for its lead-in
        kept = a.body[:-n]
        overlap = _overlap(kept, ov, count)
        if sum(p.tokens for p in overlap + body) > target:
            overlap = []
        drafts[i] = _Draft(a.section, kept, a.overlap)
        drafts[i + 1] = _Draft(b.section, body, overlap)
    return drafts


def _rebalance(prev: _Draft, tail: _Draft, target: int, ov: int,
               count: TokenCounter) -> tuple[_Draft, _Draft] | None:
    """``prev`` and its section's small ``tail`` cut again so that the smaller of the
    two is as large as possible (both within ``target``); None when no cut does better.
    A cut never separates a lead-in from the code it introduces."""
    pieces = prev.body + tail.body
    best: tuple[_Draft, _Draft] | None = None
    best_min = tail.tokens
    for cut in range(1, len(pieces)):
        if _is_code(pieces[cut]) and (pieces[cut - 1].heading or not pieces[cut - 1].atomic):
            continue
        first = _Draft(prev.section, pieces[:cut], prev.overlap)
        if first.tokens > target:
            break
        body = pieces[cut:]
        overlap = _overlap(pieces[:cut], ov, count)
        second = _Draft(tail.section, body, overlap)
        if second.tokens > target:
            second = _Draft(tail.section, body, [])
        if second.tokens > target:
            continue
        low = min(first.tokens, second.tokens)
        if low > best_min:
            best, best_min = (first, second), low
    return best


def _merge_small(drafts: list[_Draft], target: int, minimum: int, ov: int = 0,
                 count: TokenCounter | None = None) -> list[_Draft]:
    """Join drafts under ``minimum`` tokens to a neighbour when the result fits; a
    section's tail that fits nowhere is rebalanced with the draft before it."""
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
            if tail and count is not None and not drafts[i - 1].parts and not draft.parts:
                pair = _rebalance(drafts[i - 1], draft, target, ov, count)
                if pair is not None:
                    drafts[i - 1 : i + 1] = list(pair)
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

    ``min_tokens`` defaults to spec 004's 100 tokens (EC-4), at most half the
    target. Captions of code are prose pieces up to an eighth of the target.
    ``markdown`` forces or disables header-aware splitting; by default it
    follows ``doc.text_format``. Raises :class:`InvalidInput` for impossible
    settings.
    """
    if target_tokens < 8:
        raise InvalidInput(f"target_tokens must be at least 8, got {target_tokens}")
    if not 0 <= overlap < 0.5:
        raise InvalidInput(f"overlap must be in [0, 0.5), got {overlap}")
    minimum = MIN_TOKENS if min_tokens is None else min_tokens
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
    if structured:
        drafts = _keep_lead_ins(drafts, target_tokens, ov, count_tokens,
                                max(8, target_tokens // 8))
    drafts = _merge_small(drafts, target_tokens, minimum, ov, count_tokens)
    ids = section_ids(sections)
    chunks: list[Chunk] = []
    for position, draft in enumerate(drafts):
        text = draft.text()
        section = sections[draft.section]
        covered = sorted(draft.shares())
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
                heading_paths=[list(sections[k].heading_path) for k in covered]
                if len(covered) > 1 else [],
            )
        )
    return chunks
