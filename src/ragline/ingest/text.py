"""Plain-text sources: ``.txt`` files, uploads and pasted text.

Decoding lives here because every text-like parser (Markdown, HTML, text)
needs the same rules: UTF-8 (with or without BOM) first, a single-byte
fallback so a Windows-1252 file is still readable, and a refusal of binary
data mislabelled as text, which would otherwise be embedded as garbage.
"""

from __future__ import annotations

from collections.abc import Mapping

from ragline.errors import InvalidInput
from ragline.ingest.metadata import merge_metadata
from ragline.ingest.types import MetadataValue, ParsedContent


def decode_bytes(data: bytes, name: str, encoding: str | None = None) -> str:
    """Bytes → ``str`` with normalized newlines, or :class:`InvalidInput` for binary."""
    if b"\x00" in data[:8192]:
        raise InvalidInput(f"{name}: looks like a binary file, not text")
    candidates = [encoding] if encoding else []
    candidates += ["utf-8-sig", "cp1252", "latin-1"]
    for candidate in candidates:
        try:
            text = data.decode(candidate)
            break
        except (UnicodeDecodeError, LookupError):
            continue
    else:  # pragma: no cover - latin-1 decodes every byte string
        raise InvalidInput(f"{name}: cannot decode text")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def first_line_title(text: str, limit: int = 80) -> str | None:
    """A short title from the first non-empty line, for sources that have none."""
    for line in text.splitlines():
        line = line.strip().lstrip("#").strip()
        if line:
            return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"
    return None


def parse_text(
    data: bytes, name: str, base: Mapping[str, MetadataValue] | None = None
) -> ParsedContent:
    """A ``.txt`` file: the text as-is; the title is left to the loader (file stem)."""
    return ParsedContent(
        text=decode_bytes(data, name),
        source_type="txt",
        metadata=merge_metadata(base or {}, name=name),
    )
