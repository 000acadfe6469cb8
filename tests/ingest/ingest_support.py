"""Helpers for the ingestion tests: the fixture book, a token counter, PDFs.

A plain module (not conftest) so tests can import the constants by name.
"""

from __future__ import annotations

from pathlib import Path

import pytest

BOOK = Path(__file__).resolve().parents[1] / "fixtures" / "book"
SENSING = "module-1-foundations/chapter-1-sensing/01-how-robots-sense.md"
BROKEN = "module-1-foundations/chapter-1-sensing/02-broken-frontmatter.md"
CODE = "module-1-foundations/chapter-2-code/01-code-and-tables.md"
MDX = "module-1-foundations/chapter-2-code/02-components.mdx"
SPEC_DEFAULTS = {"proficiency_level": "A2", "hardware_tier": 1}


def words(text: str) -> int:
    """Whitespace token counter: exact, fast and easy to reason about in asserts."""
    return len(text.split())


def make_pdf(pages: list[str], title: str | None = None) -> bytes:
    """A text PDF with one string per page, generated so no binary is committed."""
    fpdf = pytest.importorskip("fpdf")
    pdf = fpdf.FPDF()
    if title:
        pdf.set_title(title)
    pdf.set_font("Helvetica", size=11)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 5, text)
    return bytes(pdf.output())
