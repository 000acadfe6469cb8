"""HTML sources: main content as Markdown, so the header-aware chunker applies.

trafilatura drops navigation, footers and scripts and keeps headings, lists,
tables and code. It gives up on very short or unusual pages; then a plain
text extraction with the standard library keeps the visible text rather than
failing the ingestion.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from html.parser import HTMLParser

from ragline.ingest.budgets import DEFAULT_LIMITS, ParserLimits, check_html
from ragline.ingest.metadata import merge_metadata
from ragline.ingest.text import decode_bytes
from ragline.ingest.types import MetadataValue, ParsedContent

log = logging.getLogger(__name__)

_BLOCK_TAGS = frozenset(
    {
        "address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt",
        "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6",
        "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section", "table", "td",
        "th", "tr", "ul",
    }
)  # fmt: skip
_SKIP_TAGS = frozenset({"script", "style", "noscript", "template", "svg", "head"})
_TITLE_RE = re.compile(r"<title[^>]*>(.*?)</title>", re.I | re.S)


class _TextExtractor(HTMLParser):
    """Visible text with line breaks at block elements; scripts and styles dropped."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP_TAGS:
            self._skip += 1
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP_TAGS:
            self._skip = max(0, self._skip - 1)
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    """Plain visible text of an HTML page, paragraphs separated by blank lines."""
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    lines = [" ".join(line.split()) for line in "".join(parser.parts).split("\n")]
    text = "\n".join(lines)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def html_title(html: str) -> str | None:
    """The ``<title>`` text, whitespace collapsed."""
    m = _TITLE_RE.search(html)
    if m is None:
        return None
    return " ".join(html_to_text(m.group(1)).split()) or None


def html_to_markdown(
    html: str, url: str | None = None, *, name: str | None = None,
    limits: ParserLimits = DEFAULT_LIMITS,
) -> tuple[str | None, str]:
    """``(title, markdown)`` of a page's main content, with the fallback described above.

    A page over a budget of ``limits`` (:func:`~ragline.ingest.budgets.check_html`: tags,
    nesting) is refused with :class:`~ragline.errors.InvalidInput` before it is parsed.
    """
    check_html(html, name or url or "HTML", limits)
    markdown: str | None = None
    title: str | None = None
    try:
        import trafilatura

        markdown = trafilatura.extract(
            html,
            url=url,
            output_format="markdown",
            include_tables=True,
            include_formatting=True,
            include_links=False,
            include_comments=False,
            favor_recall=True,
        )
        meta = trafilatura.extract_metadata(html, default_url=url)
        title = meta.title if meta is not None else None
    except Exception as exc:  # a parser bug must not lose the page
        log.warning("trafilatura failed on %s (%s); using plain text", url or "HTML", exc)
    if not markdown or not markdown.strip():
        markdown = html_to_text(html)
    return title or html_title(html), markdown.strip()


def parse_html(
    data: bytes,
    name: str,
    base: Mapping[str, MetadataValue] | None = None,
    *,
    limits: ParserLimits = DEFAULT_LIMITS,
    encoding: str | None = None,
) -> ParsedContent:
    """An ``.html`` file or fetched page → Markdown text and title, within ``limits``."""
    title, markdown = html_to_markdown(decode_bytes(data, name, encoding), name=name,
                                       limits=limits)
    return ParsedContent(
        text=markdown,
        source_type="html",
        text_format="markdown",
        title=title,
        metadata=merge_metadata(base or {}, name=name),
    )
