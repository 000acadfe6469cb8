"""PDF sources (hermitAI uploads and PDF URLs): pypdfium2, with pypdf as fallback.

Text is extracted page by page so chunks can say which page they start on
(hermitAI ``metadata.pageNumber``). PDFium (Chrome's PDF engine, through
``pypdfium2``) extracts the same words 12-16x faster than pypdf's pure-Python
content-stream interpreter, so it is the first choice; pypdf is kept for files
PDFium refuses to open (its lenient parser reads some damaged files) and for
installs without the pypdfium2 wheel. Scanned PDFs without a text layer are
refused with a clear message instead of producing empty chunks: OCR is out of
scope.
"""

from __future__ import annotations

import io
import logging
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from ragline.errors import InvalidInput
from ragline.ingest.budgets import DEFAULT_LIMITS, ParserLimits, check_pdf_pages, check_pdf_text
from ragline.ingest.metadata import merge_metadata
from ragline.ingest.types import MetadataValue, ParsedContent

log = logging.getLogger(__name__)

_TRAILING_WS_RE = re.compile(r"[ \t]+\n")
# PDFium is not thread-safe (pypdfium2 documents it): one document at a time per process.
_PDFIUM_LOCK = threading.Lock()


@dataclass(slots=True)
class _Extracted:
    pages: list[tuple[int, str]]
    page_count: int
    info: dict[str, str] = field(default_factory=dict)


def _clean(page_text: str) -> str:
    """Normalise newlines; strip trailing blanks and NULs some PDF producers leave behind."""
    text = page_text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    return _TRAILING_WS_RE.sub("\n", text).strip()


def _with_pdfium(data: bytes, name: str, limits: ParserLimits) -> _Extracted:
    """Extract with PDFium; raises ``PdfiumError`` for files it cannot open."""
    import pypdfium2 as pdfium

    with _PDFIUM_LOCK:
        pdf = pdfium.PdfDocument(data)
        try:
            check_pdf_pages(len(pdf), name, limits)
            pages: list[tuple[int, str]] = []
            chars = 0
            for i in range(len(pdf)):
                page = pdf[i]
                textpage = page.get_textpage()
                try:
                    pages.append((i + 1, _clean(textpage.get_text_range())))
                finally:
                    textpage.close()
                    page.close()
                chars += len(pages[-1][1])
                check_pdf_text(chars, name, limits)
            raw_info = pdf.get_metadata_dict(skip_empty=True)
            return _Extracted(pages, len(pdf), {k.lower(): str(v) for k, v in raw_info.items()})
        finally:
            pdf.close()


def _with_pypdf(data: bytes, name: str, limits: ParserLimits) -> _Extracted:
    """Extract with pypdf; :class:`InvalidInput` when it cannot read the file either."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise InvalidInput(f"{name}: the PDF is encrypted")
        check_pdf_pages(len(reader.pages), name, limits)
        pages: list[tuple[int, str]] = []
        chars = 0
        for i, page in enumerate(reader.pages):
            pages.append((i + 1, _clean(page.extract_text() or "")))
            chars += len(pages[-1][1])
            check_pdf_text(chars, name, limits)
        meta = reader.metadata
        info: dict[str, str] = {}
        if meta is not None:
            if meta.title:
                info["title"] = str(meta.title)
            if meta.author:
                info["author"] = str(meta.author)
        return _Extracted(pages, len(reader.pages), info)
    except InvalidInput:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as exc:
        raise InvalidInput(f"{name}: not a readable PDF ({exc})") from exc


def extract_pdf(data: bytes, name: str, limits: ParserLimits = DEFAULT_LIMITS) -> _Extracted:
    """Pages and document info: PDFium first, pypdf when PDFium is missing or refuses.

    Within ``limits`` (:mod:`ragline.ingest.budgets`): the page count is checked
    before any text is extracted, the extracted characters page by page.
    """
    try:
        return _with_pdfium(data, name, limits)
    except InvalidInput:  # over a budget: the other parser would read the same pages
        raise
    except ImportError:
        log.debug("pypdfium2 is not installed; using pypdf for %s", name)
    except Exception as exc:  # PdfiumError and friends: let the lenient parser try
        log.info("%s: PDFium could not read the file (%s); trying pypdf", name, exc)
    return _with_pypdf(data, name, limits)


def parse_pdf(
    data: bytes, name: str, base: Mapping[str, MetadataValue] | None = None, *,
    limits: ParserLimits = DEFAULT_LIMITS,
) -> ParsedContent:
    """Extract ``pages`` (1-based) and their joined text, within ``limits``; title from the
    PDF info."""
    extracted = extract_pdf(data, name, limits)
    pages = [(n, t) for n, t in extracted.pages if t]
    if not pages:
        raise InvalidInput(f"{name}: the PDF has no extractable text (scanned images?)")
    title = extracted.info.get("title", "").strip()
    own: dict[str, MetadataValue] = {"page_count": extracted.page_count}
    if extracted.info.get("author"):
        own["author"] = extracted.info["author"]
    return ParsedContent(
        text="\n\n".join(t for _, t in pages),
        source_type="pdf",
        title=title or None,
        metadata=merge_metadata(base or {}, own, name=name),
        pages=pages,
    )
