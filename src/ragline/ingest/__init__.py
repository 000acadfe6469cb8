"""Pure ingestion pieces: sources → :class:`SourceDocument` → :class:`Chunk` s.

No store, embedder or catalog here; the ingestion service composes these::

    doc = load_file(path, root, defaults={"proficiency_level": "A2", "hardware_tier": 1})
    chunks = chunk_document(doc, count_tokens, target_tokens=450)
    ids = assign_chunk_ids(doc.source_id, chunks, namespace=tenant)

Sources: :func:`load_file` / :func:`load_bytes` (Markdown/MDX, PDF, HTML,
text by extension), :func:`load_text` (pasted text), :func:`fetch_url` (with
an SSRF guard), :func:`discover` (a directory tree).
"""

from ragline.ingest.budgets import ParserLimits
from ragline.ingest.chunker import ROOT_SECTION_ID, chunk_document
from ragline.ingest.ids import CHUNK_NAMESPACE, assign_chunk_ids, chunk_id, content_hash
from ragline.ingest.loader import (
    PARSERS,
    discover,
    load_bytes,
    load_file,
    load_text,
    register_parser,
    sha256_hex,
)
from ragline.ingest.metadata import RESERVED_KEYS, merge_metadata, normalize_metadata
from ragline.ingest.path_metadata import extract_path_metadata, parent_doc_id
from ragline.ingest.tokens import tokenizer_json_counter, whitespace_tokens
from ragline.ingest.types import Chunk, Metadata, MetadataValue, SourceDocument, SourceType
from ragline.ingest.url import fetch_url

__all__ = [
    "CHUNK_NAMESPACE",
    "PARSERS",
    "RESERVED_KEYS",
    "ROOT_SECTION_ID",
    "Chunk",
    "Metadata",
    "MetadataValue",
    "ParserLimits",
    "SourceDocument",
    "SourceType",
    "assign_chunk_ids",
    "chunk_document",
    "chunk_id",
    "content_hash",
    "discover",
    "extract_path_metadata",
    "fetch_url",
    "load_bytes",
    "load_file",
    "load_text",
    "merge_metadata",
    "normalize_metadata",
    "parent_doc_id",
    "register_parser",
    "sha256_hex",
    "tokenizer_json_counter",
    "whitespace_tokens",
]
