"""PDF sources (hermitAI uploads and PDF URLs) via pypdf.

Text is extracted page by page so chunks can say which page they start on
(hermitAI ``metadata.pageNumber``). Scanned PDFs without a text layer are
refused with a clear message instead of producing empty chunks: OCR is out of
scope.
"""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Mapping

from ragline.errors import InvalidInput
from ragline.ingest.metadata import merge_metadata
from ragline.ingest.types import MetadataValue, ParsedContent

log = logging.getLogger(__name__)

_TRAILING_WS_RE = re.compile(r"[ \t]+\n")


def _clean(page_text: str) -> str:
    """Strip trailing blanks and NULs that some PDF producers leave behind."""
    return _TRAILING_WS_RE.sub("\n", page_text.replace("\x00", "")).strip()


def parse_pdf(
    data: bytes, name: str, base: Mapping[str, MetadataValue] | None = None
) -> ParsedContent:
    """Extract ``pages`` (1-based) and their joined text; title from the PDF info."""
    try:
        from pypdf import PdfReader
        from pypdf.errors import PdfReadError
    except ImportError as exc:  # an install without the [pdf] extra
        raise InvalidInput(
            f"{name}: PDF support is not installed (pip install 'ragline[pdf]')"
        ) from exc

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise InvalidInput(f"{name}: the PDF is encrypted")
        pages = [(i + 1, _clean(p.extract_text() or "")) for i, p in enumerate(reader.pages)]
        info = reader.metadata
    except InvalidInput:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as exc:
        raise InvalidInput(f"{name}: not a readable PDF ({exc})") from exc
    pages = [(n, t) for n, t in pages if t]
    if not pages:
        raise InvalidInput(f"{name}: the PDF has no extractable text (scanned images?)")
    title = (info.title or "").strip() if info is not None else ""
    own: dict[str, MetadataValue] = {"page_count": len(reader.pages)}
    if info is not None and info.author:
        own["author"] = str(info.author)
    return ParsedContent(
        text="\n\n".join(t for _, t in pages),
        source_type="pdf",
        title=title or None,
        metadata=merge_metadata(base or {}, own, name=name),
        pages=pages,
    )
