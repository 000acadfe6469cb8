"""HTML → Markdown with its plain-text fallback; PDF pages and refusals."""

from __future__ import annotations

import pytest
from ingest_support import make_pdf

from ragline.errors import InvalidInput
from ragline.ingest import html as html_module
from ragline.ingest.html import html_to_markdown, html_to_text
from ragline.ingest.pdf import parse_pdf

ARTICLE = """<html><head><title>Tab title</title><style>p {color: red}</style></head><body>
<nav>Home | Blog</nav><main><article><h1>Motion Planning</h1>
<p>Motion planning finds a collision-free path from a start pose to a goal pose for a robot arm.</p>
<h2>Sampling</h2><p>Sampling planners such as RRT explore the space with random samples quickly.</p>
<pre><code>planner = RRT(space)\npath = planner.solve(start, goal)</code></pre>
<table><tr><th>Planner</th><th>Complete</th></tr><tr><td>RRT</td><td>probabilistic</td></tr></table>
</article></main><script>track()</script></body></html>"""


def test_main_content_becomes_markdown_with_headings_and_tables() -> None:
    title, markdown = html_to_markdown(ARTICLE)
    assert title == "Motion Planning"
    assert "## Sampling" in markdown
    assert "| Planner | Complete |" in markdown
    assert "planner.solve(start, goal)" in markdown
    for boilerplate in ("track()", "color: red", "Home | Blog"):
        assert boilerplate not in markdown


def test_falls_back_to_plain_text_when_trafilatura_finds_nothing(monkeypatch) -> None:
    import trafilatura

    monkeypatch.setattr(trafilatura, "extract", lambda *a, **k: None)
    monkeypatch.setattr(trafilatura, "extract_metadata", lambda *a, **k: None)
    title, text = html_to_markdown(ARTICLE)
    assert title == "Tab title"  # from <title> when trafilatura gives no metadata either
    assert "Motion planning finds a collision-free path" in text
    assert "track()" not in text and "color: red" not in text
    assert "Sampling\n" in text


def test_falls_back_when_trafilatura_raises(monkeypatch, caplog) -> None:
    import trafilatura

    def boom(*args: object, **kwargs: object) -> str:
        raise RuntimeError("parser bug")

    monkeypatch.setattr(trafilatura, "extract", boom)
    _, text = html_to_markdown("<p>Tiny page.</p>")
    assert text == "Tiny page." and "parser bug" in caplog.text


def test_html_to_text_separates_blocks() -> None:
    text = html_to_text("<div>One</div><div>Two <b>bold</b></div><script>x()</script><p>Three</p>")
    assert text.split("\n\n") == ["One", "Two bold", "Three"] or text.split("\n") == [
        "One", "Two bold", "Three",
    ]  # fmt: skip
    assert html_module.html_title("<title> A \n title </title>") == "A title"


def test_pdf_pages_title_and_metadata() -> None:
    parsed = parse_pdf(make_pdf(["Alpha page.", "", "Gamma page."], title="Guide"), "g.pdf")
    assert parsed.title == "Guide"
    assert parsed.pages == [(1, "Alpha page."), (3, "Gamma page.")]  # blank page skipped
    assert parsed.text == "Alpha page.\n\nGamma page."
    assert parsed.metadata["page_count"] == 3
    assert parsed.text_format == "plain"


def test_pdf_without_text_or_not_a_pdf_is_refused() -> None:
    with pytest.raises(InvalidInput, match="no extractable text"):
        parse_pdf(make_pdf(["", ""]), "scan.pdf")
    with pytest.raises(InvalidInput, match="not a readable PDF"):
        parse_pdf(b"%PDF-1.4 garbage that is not a pdf", "bad.pdf")
