"""Discovery, the parser registry, uploads, pasted text and refusals."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from ingest_support import BOOK, CODE, MDX, SENSING, SPEC_DEFAULTS, make_pdf

from ragline.errors import InvalidInput
from ragline.ingest import discover, load_bytes, load_file, load_text, register_parser
from ragline.ingest.loader import PARSERS
from ragline.ingest.types import ParsedContent


def test_discover_finds_md_and_mdx_sorted() -> None:
    found = [p.relative_to(BOOK).as_posix() for p in discover(BOOK)]
    assert found == sorted(found)
    assert SENSING in found and MDX in found and CODE in found
    assert all(p.endswith((".md", ".mdx")) for p in found)


def test_discover_skips_hidden_and_node_modules(tmp_path: Path) -> None:
    for rel in ("a.md", "sub/b.mdx", ".git/c.md", "node_modules/pkg/d.md", "sub/.draft/e.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("# x\n\ntext\n")
    (tmp_path / "notes.txt").write_text("text")
    assert [p.relative_to(tmp_path).as_posix() for p in discover(tmp_path)] == ["a.md", "sub/b.mdx"]
    assert [p.name for p in discover(tmp_path, ("**/*.txt",))] == ["notes.txt"]
    with pytest.raises(InvalidInput):
        discover(tmp_path / "missing")


def test_load_file_sets_ids_hashes_and_merges_metadata() -> None:
    doc = load_file(BOOK / SENSING, BOOK, defaults=SPEC_DEFAULTS)
    raw = (BOOK / SENSING).read_bytes()
    assert doc.source_path == SENSING
    assert doc.source_id == SENSING.removesuffix(".md")
    assert doc.source_type == "md"
    assert doc.source_hash == hashlib.sha256(raw).hexdigest()
    assert doc.title == "Lesson 1.1: How Robots Sense"
    assert doc.metadata["module"] == 1 and doc.metadata["chapter"] == 1
    assert doc.metadata["lesson"] == 1 and doc.metadata["hardware_tier"] == 2
    assert doc.pages is None


def test_frontmatter_overrides_path_fields_and_defaults_fill_gaps(tmp_path: Path) -> None:
    path = tmp_path / "module-2-x" / "chapter-3-y" / "04-z.md"
    path.parent.mkdir(parents=True)
    path.write_text("---\nchapter: 9\n---\nBody text here.\n")
    doc = load_file(path, tmp_path, defaults=SPEC_DEFAULTS)
    assert doc.metadata["chapter"] == 9  # the author's explicit value wins
    assert doc.metadata["module"] == 2 and doc.metadata["lesson"] == 4
    assert doc.metadata["proficiency_level"] == "A2" and doc.metadata["hardware_tier"] == 1
    assert doc.title == "04-z"  # no title, no H1: the file stem


def test_unsupported_empty_binary_and_outside_root(tmp_path: Path) -> None:
    (tmp_path / "a.docx").write_bytes(b"PK\x03\x04")
    (tmp_path / "empty.md").write_text("  \n")
    (tmp_path / "only-frontmatter.md").write_text("---\ntitle: x\n---\n")
    (tmp_path / "bin.txt").write_bytes(b"abc\x00\x01\x02")
    cases = {
        "a.docx": "unsupported file type '.docx'",
        "empty.md": "empty",
        "only-frontmatter.md": "no text",
        "bin.txt": "binary",
    }
    for name, message in cases.items():
        with pytest.raises(InvalidInput, match=message):
            load_file(tmp_path / name, tmp_path)
    with pytest.raises(InvalidInput, match="not inside"):
        load_file(BOOK / SENSING, tmp_path)
    with pytest.raises(InvalidInput, match="cannot read"):
        load_file(tmp_path / "missing.md", tmp_path)


def test_upload_bytes_txt_and_pdf() -> None:
    doc = load_bytes("Café notes.\n\nSecond para.".encode("cp1252"), "uploads/notes.TXT")
    assert (doc.source_type, doc.title, doc.source_id) == ("txt", "notes", "uploads/notes")
    assert doc.text.startswith("Café notes.")
    assert doc.text_format == "plain"
    pdf = load_bytes(make_pdf(["First page.", "Second page."], title="Field Guide"), "guide.pdf")
    assert (pdf.source_type, pdf.title) == ("pdf", "Field Guide")
    assert pdf.pages == [(1, "First page."), (2, "Second page.")]
    assert pdf.metadata["page_count"] == 2


def test_html_file_becomes_markdown() -> None:
    html = b"<html><head><title>T</title></head><body><h1>Head</h1><p>Para one.</p></body></html>"
    doc = load_bytes(html, "page.html", source_id="web/page")
    assert doc.source_type == "html" and doc.text_format == "markdown"
    assert doc.source_id == "web/page"
    assert "Para one." in doc.text


def test_load_text() -> None:
    doc = load_text("My Notes on X\n\nThis is a long piece of text.", metadata={"tag": "x"})
    assert doc.source_type == "text" and doc.title == "My Notes on X"
    assert doc.source_id == load_text("My Notes on X\n\nThis is a long piece of text.").source_id
    assert doc.source_id.startswith("text-") and doc.metadata == {"tag": "x"}
    assert load_text("abc", title="T", source_id="s1").source_id == "s1"
    with pytest.raises(InvalidInput):
        load_text("   ")


def test_register_parser_adds_a_format() -> None:
    def parse_rst(data: bytes, name: str, base=None, *, limits=None) -> ParsedContent:
        return ParsedContent(text=data.decode(), source_type="txt", title="rst")

    register_parser("rst", parse_rst)
    try:
        assert load_bytes(b"Some text", "doc.rst").title == "rst"
    finally:
        PARSERS.pop(".rst")
