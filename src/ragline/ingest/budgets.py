"""Budgets for the parsers every source goes through (issue 32).

A hostile 466-byte Markdown file whose YAML frontmatter nests aliases ten levels
deep (``l1: &l1 [*l0, *l0, …]``) is shared by the YAML loader, so it loads small,
but every step that walks it (the metadata flattening, ``json.dumps``) expands it:
20 GB before the kernel killed the server. So the frontmatter's node graph is
measured *before* anything is built from it: its size, its nesting depth, how many
aliases it uses and how many nodes it would hold once every alias is expanded.
Over any limit the file is refused (:class:`~ragline.errors.InvalidInput` naming
the limit: a 400 for an upload, a per-file error in an ingestion job) and nothing
is written.

The metadata flattening (:func:`ragline.ingest.metadata.normalize_metadata`) has its
own budget of keys, depth and bytes, for every source of metadata (frontmatter, PDF
info, defaults, the text route's metadata).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from ragline.errors import InvalidInput

FRONTMATTER_MAX_BYTES = 64 * 1024
"""Characters of YAML between the ``---`` fences."""
FRONTMATTER_MAX_NODES = 10_000
"""Scalars, lists and mappings in the frontmatter once every alias is expanded."""
FRONTMATTER_MAX_ALIASES = 100
"""Alias uses (``*name``) in one frontmatter."""
FRONTMATTER_MAX_DEPTH = 32
"""Nesting of lists and mappings in the frontmatter."""

METADATA_MAX_KEYS = 1_000
"""Fields one source's metadata may flatten into."""
METADATA_MAX_BYTES = 256 * 1024
"""Characters of one source's flattened metadata (keys and values)."""
METADATA_MAX_DEPTH = 8
"""Nesting of mappings the flattening follows (deeper fields are skipped)."""


class _Measure:
    """Walks a composed YAML node graph once, each shared node once (memoised)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.memo: dict[int, tuple[int, int]] = {}  # id -> (expanded nodes, height)
        self.active: set[int] = set()
        self.aliases = 0

    def refuse(self, what: str) -> InvalidInput:
        return InvalidInput(f"{self.name}: frontmatter refused: {what}")

    def node(self, node: yaml.Node, depth: int) -> tuple[int, int]:
        key = id(node)
        if key in self.memo:  # a node met again is an alias use
            self.aliases += 1
            if self.aliases > FRONTMATTER_MAX_ALIASES:
                raise self.refuse(f"more than {FRONTMATTER_MAX_ALIASES} aliases (limit "
                                  "FRONTMATTER_MAX_ALIASES)")
            count, height = self.memo[key]
            self._check(count, depth + height)
            return count, height
        if key in self.active:  # contains itself: built as one shared object, never expanded
            return 1, 0
        if depth > FRONTMATTER_MAX_DEPTH:
            self._check(0, depth)
        children: list[Any] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        self.active.add(key)
        count, height = 1, 0
        for child in children:
            sub_count, sub_height = self.node(child, depth + 1)
            count += sub_count
            height = max(height, sub_height + 1)
            self._check(count, depth + height)
        self.active.discard(key)
        self.memo[key] = (count, height)
        return count, height

    def _check(self, count: int, depth: int) -> None:
        if count > FRONTMATTER_MAX_NODES:
            raise self.refuse(f"more than {FRONTMATTER_MAX_NODES} values once its aliases "
                              "are expanded (limit FRONTMATTER_MAX_NODES)")
        if depth > FRONTMATTER_MAX_DEPTH:
            raise self.refuse(f"nested deeper than {FRONTMATTER_MAX_DEPTH} levels (limit "
                              "FRONTMATTER_MAX_DEPTH)")


def load_frontmatter_yaml(raw: str, name: str, loader: type[Any]) -> Any:
    """``raw`` YAML loaded with ``loader`` (a safe loader), within the budgets above.

    The document is composed into nodes first (aliases stay shared there), measured,
    and only then constructed. Raises :class:`InvalidInput` naming the limit;
    :class:`yaml.YAMLError` for YAML that does not parse.
    """
    if len(raw) > FRONTMATTER_MAX_BYTES:
        raise InvalidInput(f"{name}: frontmatter refused: {len(raw)} characters (limit "
                           f"{FRONTMATTER_MAX_BYTES}, FRONTMATTER_MAX_BYTES)")
    parser = loader(raw)
    try:
        node = parser.get_single_node()
        if node is None:
            return None
        _Measure(name).node(node, 0)
        return parser.construct_document(node)
    finally:
        parser.dispose()


# -- HTML and PDF: counted on the raw input, before the expensive parse ---------------------
@dataclass(frozen=True, slots=True)
class ParserLimits:
    """The budgets of the HTML and PDF parsers, from the settings of the same names
    (``RAGLINE_HTML_MAX_TAGS`` ...). Every parser receives them (the ``limits`` argument
    of :class:`ragline.ingest.loader.Parser`); the defaults are the settings' defaults."""

    html_max_tags: int = 250_000
    """Start tags in one HTML page (a long real page has tens of thousands)."""
    html_max_depth: int = 512
    """Elements open inside one another, estimated from the raw text (see :func:`check_html`)."""
    pdf_max_pages: int = 5_000
    """Pages of one PDF, read from its page tree before any text is extracted."""
    pdf_max_text_chars: int = 32 * 1024 * 1024
    """Characters of text extracted from one PDF, counted page by page as they come."""


DEFAULT_LIMITS = ParserLimits()
"""The budgets a parser called without ``limits`` works within (the settings' defaults)."""

_TAG_RE = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9:-]*)[^>]*?(/?)>")
# Elements that never nest (void) or that the HTML parser closes on its own when the
# next one opens (so a page of unclosed <p> or <li> is not counted as deep).
_FLAT_TAGS = frozenset(
    {
        "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
        "source", "track", "wbr", "p", "li", "dt", "dd", "tr", "td", "th", "option",
        "optgroup", "thead", "tbody", "tfoot", "colgroup", "rb", "rt", "rp", "html", "head",
        "body",
    }
)  # fmt: skip


def check_html(html: str, name: str, limits: ParserLimits = DEFAULT_LIMITS) -> None:
    """Refuse a page over ``limits.html_max_tags`` start tags or nested deeper than
    ``limits.html_max_depth`` before parsing it.

    One regular-expression pass over the text: start tags are counted, and the depth is
    estimated from start and end tags of elements that nest (void elements and those the
    parser closes itself are left out). A million nested ``<div>`` took 35 s of a worker
    and 158 MB in trafilatura; this refuses them in a fraction of a second.
    """
    max_tags, max_depth = limits.html_max_tags, limits.html_max_depth
    tags = depth = 0
    for m in _TAG_RE.finditer(html):
        closing, tag, self_closing = m.group(1), m.group(2).lower(), m.group(3)
        if closing:
            if depth and tag not in _FLAT_TAGS:
                depth -= 1
            continue
        tags += 1
        if tags > max_tags:
            raise InvalidInput(f"{name}: HTML refused: more than {max_tags} tags (setting "
                               "html_max_tags)")
        if tag in _FLAT_TAGS or self_closing:
            continue
        depth += 1
        if depth > max_depth:
            raise InvalidInput(f"{name}: HTML refused: elements nested deeper than "
                               f"{max_depth} levels (setting html_max_depth)")


def check_pdf_pages(pages: int, name: str, limits: ParserLimits = DEFAULT_LIMITS) -> None:
    """Refuse a PDF of more than ``limits.pdf_max_pages`` pages, before extracting text."""
    if pages > limits.pdf_max_pages:
        raise InvalidInput(f"{name}: PDF refused: {pages} pages (limit "
                           f"{limits.pdf_max_pages}, setting pdf_max_pages)")


def check_pdf_text(chars: int, name: str, limits: ParserLimits = DEFAULT_LIMITS) -> None:
    """Refuse once the text extracted so far passes ``limits.pdf_max_text_chars``."""
    if chars > limits.pdf_max_text_chars:
        raise InvalidInput(f"{name}: PDF refused: more than {limits.pdf_max_text_chars} "
                           "characters of text (setting pdf_max_text_chars)")
