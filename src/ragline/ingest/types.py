"""Plain data types shared by every ingestion step.

They are dataclasses rather than pydantic models on purpose: ingestion runs
over thousands of chunks, is pure, and never crosses a trust boundary by
itself (the API layer validates requests before anything reaches here).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypeAlias

SourceType: TypeAlias = Literal["md", "pdf", "txt", "html", "text", "url"]
"""Where a document came from: a file by extension, pasted ``text``, or a ``url``."""

Scalar: TypeAlias = str | int | float | bool
MetadataValue: TypeAlias = Scalar | list[Scalar]
"""What a store can index and filter on: a JSON scalar or a flat list of them."""

Metadata: TypeAlias = dict[str, MetadataValue]

TextFormat: TypeAlias = Literal["markdown", "plain"]
"""How ``text`` is written: ``markdown`` gets header-aware chunking (Markdown,
HTML converted to Markdown), ``plain`` the recursive splitter (txt, PDF, text)."""


@dataclass(slots=True)
class ParsedContent:
    """What a parser extracts from raw bytes, before ids and hashes are added.

    Parsers only know the bytes and a file name; the loader turns this into a
    :class:`SourceDocument` so that ids, hashes and path metadata are decided in
    one place for every format.
    """

    text: str
    source_type: SourceType
    title: str | None = None
    metadata: Metadata = field(default_factory=dict)
    pages: list[tuple[int, str]] | None = None
    text_format: TextFormat = "plain"


@dataclass(slots=True)
class SourceDocument:
    """One ingested source (a file, a fetched URL or a pasted text), parsed.

    ``source_id`` is stable across runs (it is the ``parent_doc_id`` of the
    chunks and part of their ids); ``source_hash`` is the SHA-256 of the raw
    bytes, which the incremental pipeline compares to skip unchanged sources.
    ``pages`` is set for PDFs only: 1-based page numbers with their text, so
    chunks can cite the page they start on. ``source_path`` is the path
    relative to the ingested root (``/`` separators), an upload's file name,
    the final URL after redirects, or the source id for pasted text.
    ``text_format`` decides between header-aware and plain chunking.
    """

    source_id: str
    source_path: str
    source_type: SourceType
    title: str
    text: str
    source_hash: str
    metadata: Metadata = field(default_factory=dict)
    pages: list[tuple[int, str]] | None = None
    text_format: TextFormat = "plain"


@dataclass(slots=True)
class Chunk:
    """One retrievable unit cut from a :class:`SourceDocument`.

    Chunks carry no id: ids are derived from ``(source_id, content_hash)`` by
    :func:`ragline.ingest.ids.assign_chunk_ids`, so they follow the content and
    not the position (spec 004 FR-007).
    """

    text: str
    chunk_index: int
    section_id: str
    section_title: str
    heading_path: list[str]
    token_count: int
    content_hash: str
    page_number: int | None = None
    heading_paths: list[list[str]] = field(default_factory=list)
    """Every section the chunk covers, in reading order, when that is more than one
    (small sections merged, spec 004 EC-4); empty otherwise."""
