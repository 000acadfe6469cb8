"""A budget for every parser (issue 32): the YAML alias bomb and its relatives are refused
before they expand, fast and in little memory; the metadata flattening is bounded."""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.errors import InvalidInput
from ragline.ingest import ParserLimits
from ragline.ingest.markdown import parse_markdown
from ragline.ingest.metadata import normalize_metadata
from ragline.settings import Settings
from tests.api.helpers import local_client
from tests.hardening.hostile_inputs import alias_bomb
from tests.ingestion_support import fake_settings

pytestmark = pytest.mark.usefixtures("few_payload_indexes")


def refused(data: bytes) -> tuple[str, float, int]:
    """(message, seconds, peak bytes allocated) of parsing ``data`` as Markdown."""
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(InvalidInput) as exc:
            parse_markdown(data, "bomb.md")
        return exc.value.message, time.perf_counter() - started, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_466_byte_alias_bomb_is_refused_fast_in_little_memory() -> None:
    data = alias_bomb(levels=10, width=9)  # 9**10 = 3.5 billion values once expanded
    assert len(data) < 500
    message, seconds, peak = refused(data)
    assert "bomb.md: frontmatter refused" in message
    assert "(limit FRONTMATTER_MAX_NODES)" in message
    assert seconds < 1.0 and peak < 5 * 1024 * 1024  # measured: ~10 ms, well under 1 MB


@pytest.mark.parametrize("levels", [5, 6, 7])
def test_smaller_bombs_that_used_to_pass_in_seconds_are_refused_too(levels: int) -> None:
    message, seconds, _ = refused(alias_bomb(levels=levels, width=9))
    assert "FRONTMATTER_MAX_NODES" in message and seconds < 1.0


@pytest.mark.parametrize("yaml_text,limit", [
    ("a: " + "[" * 40 + "]" * 40, "FRONTMATTER_MAX_DEPTH"),
    ("a: &a x\n" + "\n".join(f"k{i}: *a" for i in range(150)), "FRONTMATTER_MAX_ALIASES"),
    ("a: '" + "x" * 70_000 + "'", "FRONTMATTER_MAX_BYTES"),
])
def test_each_frontmatter_limit_is_named(yaml_text: str, limit: str) -> None:
    message, _, _ = refused(f"---\n{yaml_text}\n---\n# T\n\nBody.\n".encode())
    assert limit in message


def test_a_mapping_that_contains_itself_many_times_is_skipped_at_once() -> None:
    """``b: &y {k0: *y, …, k90: *y}`` walked to the depth limit was 91**8 steps."""
    keys = ", ".join(f"k{i}: *y" for i in range(91))
    started = time.perf_counter()
    meta = parse_markdown(f"---\nb: &y {{{keys}}}\nd: ok\n---\n# T\n\nBody.\n".encode(),
                          "loop.md").metadata
    assert meta["d"] == "ok" and not any(k.startswith("b_") for k in meta)
    assert time.perf_counter() - started < 1.0


def test_ordinary_aliases_still_work() -> None:
    data = (b"---\nbase: &base {level: 2, tags: [a, b]}\nlesson: *base\nrefs: [*base, *base]\n"
            b"---\n# T\n\nBody.\n")
    meta = parse_markdown(data, "ok.md").metadata
    assert meta["lesson_level"] == 2 and meta["lesson_tags"] == ["a", "b"]
    assert meta["refs"] == ['{"level": 2, "tags": ["a", "b"]}'] * 2


def test_metadata_flattening_is_bounded_in_keys_depth_and_bytes() -> None:
    with pytest.raises(InvalidInput, match=r"more than 1000 fields \(limit METADATA_MAX_KEYS\)"):
        normalize_metadata({f"k{i}": i for i in range(1001)}, "many.md")
    with pytest.raises(InvalidInput, match=r"METADATA_MAX_BYTES"):
        normalize_metadata({"big": "x" * 300_000}, "big.md")
    cyclic: list[Any] = ["x"]
    cyclic.append(cyclic)  # a structure containing itself is kept as its short str
    assert normalize_metadata({"loop": [cyclic]}, "loop.md") == {"loop": ["['x', [...]]"]}
    shared = ["y" * 100] * 50
    nested: Any = shared
    for _ in range(5):  # 50**6 strings if expanded: sized, never serialised
        nested = [nested] * 50
    started = time.perf_counter()
    with pytest.raises(InvalidInput, match=r"METADATA_MAX_BYTES"):
        normalize_metadata({"bomb": [nested]}, "bomb.md")
    assert time.perf_counter() - started < 1.0
    deep: dict[str, Any] = {"leaf": 1}
    for _ in range(12):
        deep = {"d": deep}
    assert normalize_metadata({"deep": deep, "kept": 1}, "deep.md") == {"kept": 1}


# -- through the API ----------------------------------------------------------------------
@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = fake_settings(tmp_path, default_collection="knowledge")
    with local_client(create_app(settings)) as c:
        yield c


def test_an_uploaded_alias_bomb_is_400_naming_the_limit_and_nothing_is_written(
    client: TestClient
) -> None:
    started = time.perf_counter()
    r = client.post("/api/rag/ingest/upload",
                    files={"documentFile": ("bomb.md", alias_bomb(), "text/markdown")})
    assert time.perf_counter() - started < 10
    assert r.status_code == 400, r.text
    assert "FRONTMATTER_MAX_NODES" in r.json()["message"]
    listed = client.get("/collections/knowledge/sources")
    assert listed.status_code in (200, 404)
    assert listed.status_code == 404 or listed.json()["total"] == 0
    assert client.get("/health").status_code == 200


def test_a_bomb_in_a_directory_is_a_warning_naming_the_file_and_the_rest_is_ingested(
    client: TestClient, tmp_path: Path
) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "bomb.md").write_bytes(alias_bomb())
    (tree / "good.md").write_text("# Good\n\nGrippers hold objects.\n")
    r = client.post("/ingestion/trigger", json={"collection": "knowledge", "path": str(tree)})
    assert r.status_code == 202, r.text
    rl = client.app.state.ragline  # type: ignore[attr-defined]
    rl.ingestion.wait(rl.owner(), r.json()["job_id"], timeout=60)
    job = client.get(f"/ingestion/status/{r.json()['job_id']}").json()
    assert job["status"] == "succeeded", job
    assert any("bomb.md" in w and "FRONTMATTER_MAX_NODES" in w for w in job["warnings"]), job
    sources = client.get("/collections/knowledge/sources").json()["sources"]
    chunks = {s["source_id"]: s["chunk_count"] for s in sources}
    assert chunks["bomb"] == 0 and chunks["good"] >= 1  # the bomb's state row, no chunks


# -- against a real server process ---------------------------------------------------------
def _rss_peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_the_bomb_against_a_real_server_400_fast_small_rss_health_answering(
    tmp_path: Path
) -> None:
    """Issue 32's finding, as it happened: RSS 20.9 GB, /health timing out, the process
    killed. Now: 400 within 10 s, the peak RSS grows by less than 100 MB, /health answers
    throughout and afterwards."""
    import threading

    import httpx

    from tests.live_server import LiveServer

    srv = LiveServer(tmp_path / "data")
    try:
        srv.wait_ready()
        before = _rss_peak_mb(srv.proc.pid)
        health: list[int] = []
        done = threading.Event()

        def probe() -> None:
            while not done.is_set():
                health.append(httpx.get(srv.url + "/health", timeout=5).status_code)
                time.sleep(0.05)

        prober = threading.Thread(target=probe)
        prober.start()
        try:
            started = time.perf_counter()
            for _ in range(3):
                r = httpx.post(srv.url + "/api/rag/ingest/upload", timeout=30,
                               headers={"X-API-Key": "k"},
                               files={"documentFile": ("bomb.md", alias_bomb(), "text/markdown")})
                assert r.status_code == 400, r.text
                assert "FRONTMATTER_MAX_NODES" in r.json()["message"]
            assert time.perf_counter() - started < 10
        finally:
            done.set()
            prober.join()
        assert health and set(health) == {200}
        assert srv.proc.poll() is None
        assert _rss_peak_mb(srv.proc.pid) - before < 100
    finally:
        srv.stop()


# -- HTML and PDF: bounded before the expensive parse --------------------------------------
def _deep_html(levels: int) -> bytes:
    return (b"<html><body>" + b"<div>" * levels + b"deep" + b"</div>" * levels
            + b"</body></html>")


def test_deeply_nested_html_is_refused_before_it_is_parsed() -> None:
    """A million nested <div> (11 MB) took 35 s of a worker and 158 MB; now milliseconds."""
    from ragline.ingest.html import parse_html

    started = time.perf_counter()
    with pytest.raises(InvalidInput, match=r"deep\.html: HTML refused: .*512 levels "
                                           r"\(setting html_max_depth\)"):
        parse_html(_deep_html(1_000_000), "deep.html")
    assert time.perf_counter() - started < 2.0
    ok = parse_html(_deep_html(100), "fine.html")  # ordinary nesting still parses
    assert "deep" in ok.text


def test_an_html_page_with_too_many_tags_is_refused_and_a_long_real_page_passes() -> None:
    from ragline.ingest import budgets
    from ragline.ingest.html import html_to_markdown

    row = "<tr><td><a href='/p'>name</a></td><td><b>2</b><br></td></tr>\n"
    long_page = "<html><body><h1>Index</h1><table>" + row * 20_000 + "</table></body></html>"
    budgets.check_html(long_page, "index.html")  # 120,000 tags, 1.2 MB: within the budget
    with pytest.raises(InvalidInput, match=r"more than 250000 tags \(setting html_max_tags\)"):
        html_to_markdown("<br>" * 300_000, "https://example.org/wide")


def _pdf(pages: list[str]) -> bytes:
    from tests.ingest.ingest_support import make_pdf

    return make_pdf(pages)


def test_a_pdf_over_the_page_limit_is_refused_before_its_text_is_extracted(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragline.ingest import pdf

    extracted: list[int] = []
    original = pdf._clean  # counts the pages whose text was extracted

    def counting(text: str) -> str:
        extracted.append(1)
        return original(text)

    monkeypatch.setattr(pdf, "_clean", counting)
    three = ParserLimits(pdf_max_pages=3)
    assert pdf.parse_pdf(_pdf(["one", "two", "three"]), "ok.pdf",
                         limits=three).pages[2] == (3, "three")
    extracted.clear()
    with pytest.raises(InvalidInput, match=r"big\.pdf: PDF refused: 4 pages \(limit 3, "
                                           r"setting pdf_max_pages\)"):
        pdf.parse_pdf(_pdf(["a", "b", "c", "d"]), "big.pdf", limits=three)
    assert extracted == []


def test_a_300_page_book_passes_the_default_budgets() -> None:
    from ragline.ingest.pdf import parse_pdf

    parsed = parse_pdf(_pdf([f"Page {i}." for i in range(1, 301)]), "book.pdf")
    assert len(parsed.pages) == 300 and parsed.pages[-1] == (300, "Page 300.")
    defaults = Settings(_env_file=None)  # type: ignore[call-arg]
    assert defaults.pdf_max_pages == ParserLimits().pdf_max_pages == 5_000
    assert defaults.pdf_max_text_chars == ParserLimits().pdf_max_text_chars > 300 * 4_000
    assert (defaults.html_max_tags, defaults.html_max_depth) == (250_000, 512)


@pytest.mark.parametrize("use_pypdf", [False, True])
def test_a_pdf_whose_text_passes_the_limit_is_refused(use_pypdf: bool) -> None:
    from ragline.ingest import pdf

    data = _pdf(["word " * 100] * 3)  # ~1,500 characters in all
    limits = ParserLimits(pdf_max_text_chars=1_000)
    with pytest.raises(InvalidInput, match=r"more than 1000 characters of text \(setting "
                                           r"pdf_max_text_chars\)"):
        if use_pypdf:
            pdf._with_pypdf(data, "text.pdf", limits)
        else:
            pdf.extract_pdf(data, "text.pdf", limits)


def test_a_registered_parser_is_handed_the_configured_limits(tmp_path: Path) -> None:
    """A parser added with register_parser gets the running configuration's budgets, the
    way the built-in HTML and PDF parsers do."""
    from ragline.ingest import PARSERS, register_parser
    from ragline.ingest.types import MetadataValue, ParsedContent

    seen: list[ParserLimits] = []

    def parse_rst(data: bytes, name: str, base: Mapping[str, MetadataValue] | None = None, *,
                  limits: ParserLimits = ParserLimits()) -> ParsedContent:
        seen.append(limits)
        return ParsedContent(text=data.decode(), source_type="txt")

    register_parser("rst", parse_rst)
    try:
        settings = fake_settings(tmp_path, default_collection="knowledge", html_max_tags=77,
                                 pdf_max_pages=7)
        with local_client(create_app(settings)) as client:
            r = client.post("/api/rag/ingest/upload",
                            files={"documentFile": ("notes.rst", b"Grippers.", "text/x-rst")})
            assert r.status_code in (200, 201), r.text
    finally:
        PARSERS.pop(".rst")
    assert [(lm.html_max_tags, lm.pdf_max_pages) for lm in seen] == [(77, 7)]


# -- the settings, lowered, refuse uploads and files of a directory ----------------------
LOWERED = {"html_max_depth": 40, "html_max_tags": 2_000, "pdf_max_pages": 2,
           "pdf_max_text_chars": 5_000}
"""Budgets a test can pass with small documents; the defaults take each of them."""

OVER = {  # file name -> (bytes over one lowered budget, the setting the refusal names)
    "deep.html": (_deep_html(50), "html_max_depth"),
    "wide.html": (b"<html><body>" + b"<p>x</p>" * 2_500 + b"</body></html>", "html_max_tags"),
    "long.pdf": (_pdf(["a", "b", "c"]), "pdf_max_pages"),
    "wordy.pdf": (_pdf(["word " * 600, "word " * 600]), "pdf_max_text_chars"),
}


@pytest.fixture
def lowered_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """A server whose parser budgets are lowered through the environment, as an operator
    would set them (RAGLINE_HTML_MAX_DEPTH=40 ...)."""
    for name, value in LOWERED.items():
        monkeypatch.setenv(f"RAGLINE_{name.upper()}", str(value))
    settings = fake_settings(tmp_path, default_collection="knowledge",
                             ingest_patterns=["**/*.md", "**/*.html", "**/*.pdf"])
    assert {k: getattr(settings, k) for k in LOWERED} == LOWERED
    with local_client(create_app(settings)) as c:
        yield c


@pytest.mark.parametrize("name", sorted(OVER))
def test_a_lowered_setting_refuses_an_upload_with_a_400_naming_it_nothing_written(
    lowered_client: TestClient, name: str
) -> None:
    client = lowered_client
    data, setting = OVER[name]
    kind = "text/html" if name.endswith(".html") else "application/pdf"
    r = client.post("/api/rag/ingest/upload", files={"documentFile": (name, data, kind)})
    assert r.status_code == 400, r.text
    message = r.json()["message"]
    assert name in message and f"setting {setting})" in message
    assert str(LOWERED[setting]) in message
    listed = client.get("/collections/knowledge/sources")
    assert listed.status_code == 404 or listed.json()["total"] == 0
    jobs = client.get("/ingestion/status").json()["jobs"]
    assert jobs == []


def test_a_lowered_setting_refuses_a_fetched_page_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragline.testing.server import serve_handler, static_page

    monkeypatch.setenv("RAGLINE_HTML_MAX_DEPTH", "40")
    settings = fake_settings(tmp_path, default_collection="knowledge", allow_private_urls=True)
    with serve_handler(static_page(OVER["deep.html"][0])) as url, \
            local_client(create_app(settings)) as client:
        r = client.post("/api/rag/ingest/url", json={"url": f"{url}/deep.html"})
        assert r.status_code == 400, r.text
        assert "deeper than 40 levels (setting html_max_depth)" in r.json()["message"]
        listed = client.get("/collections/knowledge/sources")
        assert listed.status_code == 404 or listed.json()["total"] == 0


def test_the_same_uploads_pass_the_default_settings(client_all_formats: TestClient) -> None:
    for name, (data, _) in sorted(OVER.items()):
        kind = "text/html" if name.endswith(".html") else "application/pdf"
        r = client_all_formats.post("/api/rag/ingest/upload",
                                    files={"documentFile": (name, data, kind)})
        assert r.status_code in (200, 201), (name, r.text)
    sources = client_all_formats.get("/collections/knowledge/sources").json()["sources"]
    assert sorted(s["source_id"] for s in sources) == sorted(f"upload/{n}" for n in OVER)


def test_a_lowered_setting_refuses_files_of_a_directory_naming_it_the_rest_ingested(
    lowered_client: TestClient, tmp_path: Path
) -> None:
    client = lowered_client
    tree = tmp_path / "tree"
    tree.mkdir()
    for name, (data, _) in OVER.items():
        (tree / name).write_bytes(data)
    (tree / "good.md").write_text("# Good\n\nGrippers hold objects.\n")
    (tree / "small.html").write_bytes(_deep_html(10))
    r = client.post("/ingestion/trigger", json={"collection": "knowledge", "path": str(tree)})
    assert r.status_code == 202, r.text
    client.app.state.ragline.services.jobs.wait(  # type: ignore[attr-defined]
        r.json()["job_id"], timeout=60)
    job = client.get(f"/ingestion/status/{r.json()['job_id']}").json()
    assert job["status"] == "succeeded", job
    for name, (_, setting) in OVER.items():
        assert any(name in w and f"setting {setting})" in w for w in job["warnings"]), (name, job)
    sources = client.get("/collections/knowledge/sources").json()["sources"]
    chunks = {s["source_id"]: s["chunk_count"] for s in sources}
    assert {sid for sid, n in chunks.items() if n} == {"good", "small"}, chunks


@pytest.fixture
def client_all_formats(tmp_path: Path) -> Iterator[TestClient]:
    settings = fake_settings(tmp_path, default_collection="knowledge",
                             ingest_patterns=["**/*.md", "**/*.html", "**/*.pdf"])
    with local_client(create_app(settings)) as c:
        yield c


def test_a_deep_html_upload_is_400_naming_the_limit_at_the_default_settings(
    client_all_formats: TestClient
) -> None:
    r = client_all_formats.post("/api/rag/ingest/upload",
                                files={"documentFile": ("deep.html", _deep_html(5_000),
                                                        "text/html")})
    assert r.status_code == 400, r.text
    assert "(setting html_max_depth)" in r.json()["message"]
    listed = client_all_formats.get("/collections/knowledge/sources")
    assert listed.status_code == 404 or listed.json()["total"] == 0


# -- multipart parts and Markdown structure ------------------------------------------------
@pytest.mark.parametrize("files,data,what", [
    ([("documentFile", ("a.md", b"# A\n\nOne.", "text/markdown")),
      ("documentFile", ("b.md", b"# B\n\nTwo.", "text/markdown"))], {}, "files"),
    ([("documentFile", ("a.md", b"# A\n\nOne.", "text/markdown"))],
     {f"f{i}": "x" for i in range(11)}, "fields"),
    ([("documentFile", ("a.md", b"# A\n\nOne.", "text/markdown"))],
     {"note": "x" * (1024 * 1024 + 1)}, "part"),
])
def test_multipart_parts_are_bounded_400_and_nothing_written(
    client_all_formats: TestClient, files: Any, data: dict[str, str], what: str
) -> None:
    """One file, at most 10 fields, a non-file field of at most 1 MiB (Starlette's form
    limits, set in api/routes/rag_ingest.py): past any of them a 400, nothing written."""
    r = client_all_formats.post("/api/rag/ingest/upload", files=files, data=data)
    assert r.status_code == 400, r.text
    assert what in r.json()["message"].lower(), r.text
    listed = client_all_formats.get("/collections/knowledge/sources")
    assert listed.status_code == 404 or listed.json()["total"] == 0


def test_markdown_nesting_is_bounded_by_the_parser() -> None:
    """markdown-it stops nesting at 20 levels: 100,000 '>' (a quote in a quote ...) and
    as many nested list markers parse fast into one flat text."""
    for body in ("> " * 100_000 + "deep", "- " * 100_000 + "deep"):
        started = time.perf_counter()
        parsed = parse_markdown(f"# T\n\n{body}\n".encode(), "deep.md")
        assert time.perf_counter() - started < 5.0
        assert "deep" in parsed.text
