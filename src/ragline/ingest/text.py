"""Plain-text sources: ``.txt`` files, uploads and pasted text.

Decoding lives here because every text-like parser (Markdown, HTML, text)
needs the same rules, in this order:

1. an encoding the transport declared (an HTTP ``charset``), if it decodes;
2. a UTF-32/UTF-16 byte-order mark (Windows editors save "Unicode" text so);
3. NUL bytes without such a BOM: binary mislabelled as text, refused (it
   would be embedded as garbage; UTF-16 without a BOM is refused too);
4. UTF-8, with or without BOM: the fast path, almost every file stops here;
5. ``charset-normalizer`` guesses the legacy encoding (Shift-JIS, GB18030,
   Windows-125x, ...) from the byte statistics; when it finds nothing
   coherent the data is refused as binary.
"""

from __future__ import annotations

import codecs
import logging
from collections.abc import Mapping

from ragline.errors import InvalidInput
from ragline.ingest.budgets import DEFAULT_LIMITS, ParserLimits
from ragline.ingest.metadata import merge_metadata
from ragline.ingest.types import MetadataValue, ParsedContent

log = logging.getLogger(__name__)

# UTF-32-LE's BOM starts with UTF-16-LE's: test the longer ones first.
_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def _normalize_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _detect(data: bytes, name: str) -> str:
    """Legacy-encoded text via charset-normalizer, or :class:`InvalidInput`."""
    from charset_normalizer import from_bytes

    best = from_bytes(data).best()
    if best is None:
        raise InvalidInput(f"{name}: looks like a binary file, not text")
    log.debug("%s: decoded as %s (not UTF-8)", name, best.encoding)
    return str(best)


def decode_bytes(data: bytes, name: str, encoding: str | None = None) -> str:
    """Bytes → ``str`` with normalized newlines, or :class:`InvalidInput` for binary."""
    if encoding:
        try:
            return _normalize_newlines(data.decode(encoding))
        except (UnicodeDecodeError, LookupError):
            pass  # a wrong or unknown declared charset: detect instead
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                return _normalize_newlines(data.decode(codec).lstrip("\ufeff"))
            except UnicodeDecodeError as exc:
                raise InvalidInput(f"{name}: not valid {codec.upper()} text") from exc
    if b"\x00" in data[:8192]:  # valid UTF-8 too, but no text file holds NULs
        raise InvalidInput(f"{name}: looks like a binary file, not text")
    try:
        return _normalize_newlines(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        pass
    return _normalize_newlines(_detect(data, name))


def first_line_title(text: str, limit: int = 80) -> str | None:
    """A short title from the first non-empty line, for sources that have none."""
    for line in text.splitlines():
        line = line.strip().lstrip("#").strip()
        if line:
            return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"
    return None


def parse_text(
    data: bytes, name: str, base: Mapping[str, MetadataValue] | None = None, *,
    limits: ParserLimits = DEFAULT_LIMITS,
) -> ParsedContent:
    """A ``.txt`` file: the text as-is; the title is left to the loader (file stem).
    ``limits`` (the HTML and PDF budgets) has nothing to bound here."""
    return ParsedContent(
        text=decode_bytes(data, name),
        source_type="txt",
        metadata=merge_metadata(base or {}, name=name),
    )
