"""From a file (or uploaded bytes, or pasted text) to a :class:`SourceDocument`.

The parser is chosen by extension through :data:`PARSERS`, so a new format is
one :func:`register_parser` call and not another branch. Everything that must
be identical for every format is decided here: the source id, the hash of the
raw bytes, the path metadata and the metadata precedence
``defaults < path fields < the source's own metadata``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Protocol

from ragline.errors import InvalidInput
from ragline.ingest.budgets import DEFAULT_LIMITS, ParserLimits
from ragline.ingest.html import parse_html
from ragline.ingest.markdown import parse_markdown
from ragline.ingest.metadata import (
    apply_frontmatter_defaults,
    merge_metadata,
    normalize_metadata,
)
from ragline.ingest.path_metadata import extract_path_metadata, parent_doc_id, to_posix
from ragline.ingest.pdf import parse_pdf
from ragline.ingest.text import first_line_title, parse_text
from ragline.ingest.types import MetadataValue, ParsedContent, Scalar, SourceDocument


class Parser(Protocol):
    """``(raw bytes, file name, lower-priority metadata, *, limits) -> ParsedContent``.

    ``limits`` are the parser budgets of the running configuration (the settings
    ``html_max_tags``, ``html_max_depth``, ``pdf_max_pages``, ``pdf_max_text_chars``):
    every parser, a registered one included, is handed them on each call and refuses
    input over them with :class:`InvalidInput` naming the setting, before the expensive
    parse."""

    def __call__(
        self, data: bytes, name: str, base: Mapping[str, MetadataValue] | None = None, *,
        limits: ParserLimits = DEFAULT_LIMITS,
    ) -> ParsedContent: ...


PARSERS: dict[str, Parser] = {
    ".md": parse_markdown,
    ".markdown": parse_markdown,
    ".mdx": parse_markdown,
    ".txt": parse_text,
    ".text": parse_text,
    ".pdf": parse_pdf,
    ".html": parse_html,
    ".htm": parse_html,
}
"""Lower-case extension → parser. Mutate through :func:`register_parser`."""

SKIP_DIRS: frozenset[str] = frozenset({"node_modules", "__pycache__"})
"""Directory names :func:`discover` never descends into (besides hidden ones)."""


def register_parser(suffix: str, parser: Parser) -> None:
    """Make files ending in ``suffix`` (e.g. ``".rst"``) loadable."""
    PARSERS[suffix.lower() if suffix.startswith(".") else "." + suffix.lower()] = parser


def sha256_hex(data: bytes) -> str:
    """The hex SHA-256 used for ``source_hash`` (raw bytes) everywhere."""
    return hashlib.sha256(data).hexdigest()


def load_bytes(
    data: bytes,
    source_path: str,
    *,
    source_id: str | None = None,
    defaults: Mapping[str, object] | None = None,
    path_pattern: str | re.Pattern[str] | None = None,
    frontmatter_defaults: Mapping[str, Scalar] | None = None,
    limits: ParserLimits = DEFAULT_LIMITS,
) -> SourceDocument:
    """Parse raw bytes named ``source_path`` (a relative path or an upload's file name).

    ``source_id`` defaults to :func:`parent_doc_id` of the path; ``limits`` are the
    parser budgets (HTML tags and nesting, PDF pages and text) handed to the parser.
    ``frontmatter_defaults`` fill fields a Markdown source lacks or has
    malformed, with a warning naming the file (spec 004; see
    :func:`apply_frontmatter_defaults`); other formats are left alone. Raises
    :class:`InvalidInput` for an unsupported extension, an empty file, a file over a
    budget, or a file with no text in it.
    """
    source_path = to_posix(source_path)
    suffix = PurePosixPath(source_path).suffix.lower()
    parser = PARSERS.get(suffix)
    if parser is None:
        supported = ", ".join(sorted(PARSERS))
        raise InvalidInput(
            f"{source_path}: unsupported file type {suffix or '(none)'!r}; supported: {supported}"
        )
    if not data.strip():
        raise InvalidInput(f"{source_path}: the file is empty")
    base = merge_metadata(
        normalize_metadata(dict(defaults or {})),
        extract_path_metadata(source_path, path_pattern),
        name=source_path,
    )
    parsed = parser(data, source_path, base, limits=limits)
    if frontmatter_defaults and parsed.source_type == "md":
        parsed.metadata = apply_frontmatter_defaults(
            parsed.metadata, frontmatter_defaults, source_path
        )
    return build_document(
        parsed,
        data,
        source_id=source_id or parent_doc_id(source_path),
        source_path=source_path,
        fallback_title=PurePosixPath(source_path).stem,
    )


def build_document(
    parsed: ParsedContent,
    raw: bytes,
    *,
    source_id: str,
    source_path: str,
    fallback_title: str,
) -> SourceDocument:
    """Attach ids and hashes to parsed content; refuse documents without text."""
    if not parsed.text.strip():
        raise InvalidInput(f"{source_path}: no text to ingest")
    return SourceDocument(
        source_id=source_id,
        source_path=source_path,
        source_type=parsed.source_type,
        title=parsed.title or fallback_title,
        text=parsed.text,
        source_hash=sha256_hex(raw),
        metadata=parsed.metadata,
        pages=parsed.pages,
        text_format=parsed.text_format,
    )


def load_file(
    path: str | Path,
    root: str | Path,
    *,
    defaults: Mapping[str, object] | None = None,
    path_pattern: str | re.Pattern[str] | None = None,
    frontmatter_defaults: Mapping[str, Scalar] | None = None,
    limits: ParserLimits = DEFAULT_LIMITS,
) -> SourceDocument:
    """Load ``path``; its ``source_path``/``source_id`` are relative to ``root``."""
    path, root = Path(path), Path(root)
    try:
        relative = path.resolve().relative_to(root.resolve())
    except ValueError as exc:
        raise InvalidInput(f"{path} is not inside {root}") from exc
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"{relative.as_posix()}: cannot read file ({exc.strerror})") from exc
    return load_bytes(data, relative.as_posix(), defaults=defaults, path_pattern=path_pattern,
                      frontmatter_defaults=frontmatter_defaults, limits=limits)


def load_text(
    text: str,
    *,
    title: str | None = None,
    source_id: str | None = None,
    metadata: Mapping[str, object] | None = None,
) -> SourceDocument:
    """Pasted text (hermitAI ``POST /api/rag/ingest/text``) as a ``text`` source.

    Without ``source_id`` the id is ``text-<first 16 hex of the hash>``, so
    sending the same text twice addresses the same source.
    """
    if not text.strip():
        raise InvalidInput("text must not be empty")
    raw = text.encode("utf-8")
    digest = sha256_hex(raw)
    sid = source_id or f"text-{digest[:16]}"
    parsed = ParsedContent(
        text=text.replace("\r\n", "\n").strip("\n"),
        source_type="text",
        title=title or first_line_title(text),
        metadata=normalize_metadata(dict(metadata or {})),
    )
    return build_document(parsed, raw, source_id=sid, source_path=sid, fallback_title="Untitled")


def _skipped(relative: PurePosixPath) -> bool:
    return any(part.startswith(".") or part in SKIP_DIRS for part in relative.parts)


def discover(root: str | Path, patterns: Iterable[str] = ("**/*.md", "**/*.mdx")) -> list[Path]:
    """Files under ``root`` matching any glob, sorted by relative path.

    Hidden files and directories (``.git``, ``.docusaurus``) and
    :data:`SKIP_DIRS` are skipped, as are matches that resolve outside ``root``
    through a symlink. Sorting makes runs and chunk order reproducible.
    """
    root = Path(root)
    if not root.is_dir():
        raise InvalidInput(f"{root} is not a directory")
    resolved_root = root.resolve()
    found: dict[str, Path] = {}
    for pattern in patterns:
        for path in root.glob(pattern):
            relative = PurePosixPath(path.relative_to(root).as_posix())
            if _skipped(relative) or not path.is_file():
                continue
            if not path.resolve().is_relative_to(resolved_root):
                continue
            found[str(relative)] = path
    return [found[key] for key in sorted(found)]


def tree_sources(root: str | Path, patterns: Iterable[str]) -> dict[str, tuple[str, Path]]:
    """The files of a tree by source id (:func:`parent_doc_id` of the relative path) as
    ``(relative POSIX path, file)``, in :func:`discover` order. Every path that ingests a
    tree (a directory job, the webhook, the CLI's upload fallback) reads it through here,
    so a file gets the same source id whichever path it takes.

    Two files with one source id (``a/README.md`` and ``a/README.mdx``) would silently
    replace each other: refused, naming the setting that chooses the files.
    """
    files: dict[str, tuple[str, Path]] = {}
    for file in discover(root, patterns):
        rel = file.relative_to(root).as_posix()
        sid = parent_doc_id(rel)
        if sid in files:
            raise InvalidInput(
                f"{rel} and {files[sid][0]} would be the same source ({sid!r}: a source id "
                "is the path without its extension); rename one, or narrow "
                "RAGLINE_INGEST_PATTERNS so only one of them is ingested")
        files[sid] = (rel, file)
    return files
