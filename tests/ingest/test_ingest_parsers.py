"""Parsing with real libraries (issue 12 item 4): markdown-it-py structure, charset
detection behind the UTF-8 fast path, and PDFium for PDFs with pypdf as fallback."""

from __future__ import annotations

import pytest
from ingest_support import make_pdf, words

from ragline.errors import InvalidInput
from ragline.ingest import chunk_document, load_bytes
from ragline.ingest import pdf as pdf_module
from ragline.ingest.blocks import markdown_sections
from ragline.ingest.markdown import markdown_outline, parse_markdown
from ragline.ingest.text import decode_bytes


def _sections(text: str) -> list[tuple[list[str], list[tuple[str, str]]]]:
    return [(s.heading_path, [(b.kind, b.text) for b in s.blocks]) for s in markdown_sections(text)]


# --- Markdown structure ------------------------------------------------------------------


def test_setext_headings_open_sections_and_give_the_title() -> None:
    text = "Robot Guide\n===========\n\nIntro.\n\nSensors\n-------\n\nCameras see.\n"
    assert _sections(text) == [
        ([], [("heading", "Robot Guide\n==========="), ("text", "Intro.")]),
        (["Sensors"], [("heading", "Sensors\n-------"), ("text", "Cameras see.")]),
    ]
    assert parse_markdown(text.encode(), "g.md").title == "Robot Guide"


def test_a_thematic_break_after_a_blank_line_is_not_a_setext_heading() -> None:
    text = "## Part\n\nFirst.\n\n---\n\nSecond.\n"
    assert _sections(text) == [(["Part"], [("heading", "## Part"), ("text", "First."),
                                           ("text", "Second.")])]  # fmt: skip


def test_atx_headings_indented_up_to_three_spaces_but_not_four() -> None:
    text = ("   ## Three spaces ##\nBody one.\n\n    ## four spaces is code\n\n"
            " ### One space\nBody two.\n")
    sections = _sections(text)
    assert [s[0] for s in sections] == [["Three spaces"], ["Three spaces", "One space"]]
    assert sections[0][1][0] == ("heading", "## Three spaces ##")
    assert ("text", "    ## four spaces is code") in sections[0][1]


def test_headings_in_code_quotes_and_lists_open_no_section() -> None:
    text = "## Real\n\n```bash\n# comment\n```\n\n> # quoted\n\n- # listed\n\n~~~\n## tilde\n~~~\n"
    outline = markdown_outline(text)
    assert [h.title for h in outline.headings] == ["Real"]
    assert [kind for _, _, kind in outline.blocks] == ["code", "code"]


def test_tables_without_a_leading_pipe_are_atomic_tables() -> None:
    table = "Sensor | Range | Rate\n--- | :---: | ---:\nLidar | 30 m | 10 Hz\nCamera | 10 m | 30 Hz"
    text = f"## Specs\n\nCompare them.\n{table}\n\nAfter the table.\n"
    blocks = _sections(text)[0][1]
    assert ("table", table) in blocks
    assert blocks[-1] == ("text", "After the table.")
    # a table that fits the target is never cut, even when a chunk boundary is near
    doc = load_bytes(text.encode(), "specs.md")
    chunks = chunk_document(doc, words, target_tokens=30, overlap=0.0, min_tokens=1)
    assert sum(table in c.text for c in chunks) == 1


def test_an_oversized_pipe_less_table_repeats_its_header() -> None:
    rows = "\n".join(f"row{i} | value {i} | more words here" for i in range(30))
    text = f"## Big\n\nname | value | note\n--- | --- | ---\n{rows}\n"
    chunks = chunk_document(load_bytes(text.encode(), "big.md"), words, target_tokens=40)
    table_chunks = [c for c in chunks if "row" in c.text]
    assert len(table_chunks) > 1
    assert all("name | value | note\n--- | --- | ---" in c.text for c in table_chunks)


def test_ordinary_documents_keep_their_sections() -> None:
    text = ("# T\n\nIntro.\n\n## A\n\nText a.\n\n| x | y |\n|---|---|\n| 1 | 2 |\n\n"
            "### A.1\n\n```py\nx = 1\n```\n")
    assert _sections(text) == [
        ([], [("heading", "# T"), ("text", "Intro.")]),
        (["A"], [("heading", "## A"), ("text", "Text a."),
                 ("table", "| x | y |\n|---|---|\n| 1 | 2 |")]),
        (["A", "A.1"], [("heading", "### A.1"), ("code", "```py\nx = 1\n```")]),
    ]  # fmt: skip


# --- text decoding ------------------------------------------------------------------------

JAPANESE = (
    "# ロボットの感覚\n\nロボットはカメラとライダーで世界を感じます。\n\n"
    "## センサー\n\n加速度計は傾きを測ります。\n"
)


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_utf16_and_utf32_with_bom_decode(codec: str) -> None:
    data = JAPANESE.replace("\n", "\r\n").encode(codec)
    if codec in ("utf-16-le", "utf-16-be"):  # these codecs write no BOM: add it
        data = "\ufeff".encode(codec) + data
    assert decode_bytes(data, "j.md") == JAPANESE
    doc = load_bytes(data, "lesson.md")
    assert doc.title == "ロボットの感覚"
    assert [s.heading_path for s in markdown_sections(doc.text)] == [[], ["センサー"]]
    assert "加速度計は傾きを測ります。" in chunk_document(doc, words, target_tokens=50)[-1].text


def test_shift_jis_and_other_legacy_encodings_are_detected() -> None:
    long_jp = JAPANESE * 3
    assert decode_bytes(long_jp.encode("shift_jis"), "sj.txt") == long_jp
    assert load_bytes(long_jp.encode("shift_jis"), "sj.md").title == "ロボットの感覚"
    cyrillic = "Робот видит мир камерой и лидаром. Датчики измеряют расстояние.\n" * 3
    assert decode_bytes(cyrillic.encode("cp1251"), "ru.txt") == cyrillic


def test_utf8_fast_path_and_declared_charset() -> None:
    assert decode_bytes("Grüße\r\n".encode(), "a.txt") == "Grüße\n"
    assert decode_bytes("\ufeffBOM text".encode(), "a.txt") == "BOM text"
    assert decode_bytes("Grüße".encode("latin-1"), "a.html", "iso-8859-1") == "Grüße"
    assert decode_bytes("Grüße".encode(), "a.html", "no-such-codec") == "Grüße"


def test_binary_is_still_refused() -> None:
    for data in (b"abc\x00\x01\x02", bytes(range(1, 256)) * 20, b"\x89PNG\r\n\x1a\n" + bytes(500)):
        with pytest.raises(InvalidInput, match="binary"):
            decode_bytes(data, "x.txt")
    with pytest.raises(InvalidInput, match="binary"):
        load_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4, "image.md")


# --- PDF ----------------------------------------------------------------------------------

PAGES = [
    "Chapter one. Robots sense the world with cameras. " * 8,
    "Chapter two. Motors and actuators move the joints. " * 8,
    "",
    "Chapter four. Middleware connects the programs. " * 8,
]


def test_multi_page_pdf_with_pdfium(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pypdf(data: bytes, name: str) -> None:
        raise AssertionError("pypdf must not be needed for a readable PDF")

    monkeypatch.setattr(pdf_module, "_with_pypdf", no_pypdf)
    parsed = pdf_module.parse_pdf(make_pdf(PAGES, title="Robot Notes"), "notes.pdf")
    assert parsed.title == "Robot Notes"
    assert [n for n, _ in parsed.pages or []] == [1, 2, 4]  # the blank page is skipped
    assert parsed.metadata["page_count"] == 4
    page_words = [" ".join(t.split()) for _, t in parsed.pages or []]
    assert page_words == [" ".join(p.split()) for p in PAGES if p]
    doc = load_bytes(make_pdf(PAGES), "notes.pdf")
    chunks = chunk_document(doc, words, target_tokens=40)
    assert {c.page_number for c in chunks} == {1, 2, 4}
    assert [c.page_number for c in chunks] == sorted(c.page_number or 0 for c in chunks)
    assert "Middleware" in next(c.text for c in chunks if c.page_number == 4)


def test_pypdf_is_the_fallback_when_pdfium_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = pdf_module.parse_pdf(make_pdf(PAGES), "a.pdf")

    def broken(data: bytes, name: str) -> None:
        raise RuntimeError("Failed to load document (PDFium: Data format error)")

    monkeypatch.setattr(pdf_module, "_with_pdfium", broken)
    fallback = pdf_module.parse_pdf(make_pdf(PAGES), "a.pdf")
    assert [n for n, _ in fallback.pages or []] == [n for n, _ in expected.pages or []]
    assert [t.split() for _, t in fallback.pages or []] == [
        t.split() for _, t in expected.pages or []
    ]
    with pytest.raises(InvalidInput, match="not a readable PDF"):
        pdf_module.parse_pdf(b"%PDF-1.4 garbage", "bad.pdf")
