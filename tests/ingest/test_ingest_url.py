"""Fetching URLs: content types, redirects, the size cap and the SSRF guard."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import httpx
import pytest
from ingest_support import make_pdf, words

from ragline.errors import InvalidInput, PayloadTooLarge
from ragline.ingest import chunk_document, fetch_url
from ragline.ingest.netguard import refusal_reason
from ragline.ingest.url import canonical_url
from ragline.testing.server import QuietHandler, serve_handler

PAGE = b"""<html><head><title>Sensors page</title><script>var secret = 1;</script></head>
<body><nav>Home | Blog | About</nav><article>
<h1>Robot Sensors</h1>
<p>Robots perceive the world through cameras, lidar and inertial sensors of many kinds.</p>
<h2>Cameras</h2><p>A camera gives dense colour images at thirty frames per second.</p>
<h2>Lidar</h2><p>Lidar measures distances with laser pulses and builds point clouds of a room.</p>
</article><footer>Copyright 2025</footer></body></html>"""
MARKDOWN = b"---\ntitle: Remote Notes\nlayer: L3\n---\n# Remote Notes\n\n## Part\n\nSome text."
ROUTES: dict[str, tuple[int, dict[str, str], bytes]] = {
    "/page.html": (200, {"Content-Type": "text/html; charset=utf-8"}, PAGE),
    "/notes.txt": (200, {"Content-Type": "text/plain"}, b"# not a heading\nPlain   text kept."),
    "/notes": (200, {"Content-Type": "text/markdown; charset=utf-8"}, MARKDOWN),
    "/redirect": (302, {"Location": "/page.html"}, b""),
    "/redirect-private": (302, {"Location": "http://10.0.0.5/secret"}, b""),
    "/loop": (302, {"Location": "/loop"}, b""),
    "/missing": (404, {"Content-Type": "text/plain"}, b"nope"),
    "/blob": (200, {"Content-Type": "application/octet-stream"}, b"\x01\x02\x03"),
    "/declared-big": (200, {"Content-Type": "text/plain", "Content-Length": "99999999"}, b"x"),
}


class _Handler(QuietHandler):
    def do_GET(self) -> None:
        if self.path == "/doc.pdf":
            body = make_pdf(["Remote PDF page one.", "Remote PDF page two."])
            self.send(200, body, {"Content-Type": "application/pdf"})
        elif self.path == "/stream-big":  # no Content-Length: only the stream cap can stop it
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                for _ in range(200):
                    self.wfile.write(b"x" * 10_000)
        else:
            status, headers, body = ROUTES.get(self.path, (404, {}, b"not found"))
            self.send(status, body, headers)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with serve_handler(_Handler) as url:
        yield url


def test_html_page_becomes_markdown(server: str) -> None:
    doc = fetch_url(f"{server}/page.html#top", allow_private=True)
    assert doc.source_type == "url" and doc.text_format == "markdown"
    assert doc.title == "Robot Sensors"
    assert doc.source_id == f"{server}/page.html"  # canonical: no fragment
    assert doc.metadata == {"source_url": f"{server}/page.html", "content_type": "text/html"}
    assert "## Cameras" in doc.text and "laser pulses" in doc.text
    assert "secret" not in doc.text and "Copyright" not in doc.text
    sections = {c.section_id for c in chunk_document(doc, words, 60, min_tokens=0)}
    assert {"cameras", "lidar"} <= sections


def test_same_local_url_is_refused_without_allow_private(server: str) -> None:
    with pytest.raises(InvalidInput) as err:
        fetch_url(f"{server}/page.html")
    assert str(err.value) == ("URL resolves to a loopback address (127.0.0.1); refusing to "
                              "fetch (setting allow_private_urls permits private addresses)")
    assert err.value.details["reason"] == "a loopback address"


def test_localhost_name_is_refused() -> None:
    with pytest.raises(InvalidInput, match=r"loopback address \((127\.0\.0\.1|::1)\)"):
        fetch_url("http://localhost:9/anything")


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://10.0.0.5/x", "a private address (10.0.0.5)"),
        ("http://192.168.1.10/", "a private address (192.168.1.10)"),
        ("http://169.254.169.254/latest/meta-data/", "a cloud metadata address (169.254.169.254)"),
        ("http://[fd00:ec2::254]/", "a cloud metadata address (fd00:ec2::254)"),
        ("http://[::1]:8080/", "a loopback address (::1)"),
        ("http://0.0.0.0/", "an unspecified address (0.0.0.0)"),
        ("http://169.254.10.1/", "a link-local address (169.254.10.1)"),
        ("http://224.0.0.1/", "a multicast address (224.0.0.1)"),
        ("http://[::ffff:10.0.0.1]/", "a private address (::ffff:a00:1)"),
        ("http://240.0.0.1/", "a reserved address (240.0.0.1)"),
    ],
)
def test_non_public_addresses_are_refused_with_the_reason(url: str, reason: str) -> None:
    with pytest.raises(InvalidInput) as err:
        fetch_url(url)
    assert str(err.value) == (f"URL resolves to {reason}; refusing to fetch (setting "
                              "allow_private_urls permits private addresses)")


def test_public_address_passes_the_check() -> None:
    assert refusal_reason("93.184.216.34") is None
    assert refusal_reason("2606:4700:4700::1111") is None


def _public_resolver(addresses: dict[str, list[str]]):
    def resolve(host: str, port: int) -> list[str]:
        return addresses[host]

    return resolve


def test_every_redirect_hop_is_checked() -> None:
    seen: list[tuple[str, str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((str(request.url), request.headers["host"]))
        return httpx.Response(302, headers={"Location": "http://10.0.0.5/admin"})

    with pytest.raises(InvalidInput, match=r"private address \(10\.0\.0\.5\); refusing"):
        fetch_url(
            "http://public.example/start",
            resolver=_public_resolver({"public.example": ["93.184.216.34"]}),
            transport=httpx.MockTransport(handler),
        )
    # the request went to the checked address, with the real host name
    assert seen == [("http://93.184.216.34/start", "public.example")]


def test_one_private_address_among_public_ones_is_enough_to_refuse() -> None:
    resolver = _public_resolver({"rebind.example": ["93.184.216.34", "127.0.0.1"]})
    with pytest.raises(InvalidInput, match="loopback"):
        fetch_url("http://rebind.example/", resolver=resolver)


def test_redirects_are_followed_and_limited(server: str) -> None:
    doc = fetch_url(f"{server}/redirect", allow_private=True)
    assert doc.metadata["source_url"] == f"{server}/page.html"
    assert doc.source_id == f"{server}/redirect"  # the id follows what was asked for
    with pytest.raises(InvalidInput, match="too many redirects"):
        fetch_url(f"{server}/loop", allow_private=True, max_redirects=3)


def test_size_cap_is_enforced_while_streaming(server: str) -> None:
    with pytest.raises(PayloadTooLarge, match="1000 bytes"):
        fetch_url(f"{server}/stream-big", allow_private=True, max_bytes=1000)
    with pytest.raises(PayloadTooLarge, match="99999999"):
        fetch_url(f"{server}/declared-big", allow_private=True)


def test_text_markdown_and_pdf_content_types(server: str) -> None:
    plain = fetch_url(f"{server}/notes.txt", allow_private=True)
    assert plain.text == "# not a heading\nPlain   text kept." and plain.text_format == "plain"
    assert plain.title == "notes.txt"
    markdown = fetch_url(f"{server}/notes", allow_private=True, defaults={"hardware_tier": 1})
    assert markdown.title == "Remote Notes" and markdown.text_format == "markdown"
    assert markdown.metadata["layer"] == "L3" and markdown.metadata["hardware_tier"] == 1
    pdf = fetch_url(f"{server}/doc.pdf", allow_private=True)
    assert pdf.pages == [(1, "Remote PDF page one."), (2, "Remote PDF page two.")]
    assert pdf.source_type == "url" and pdf.metadata["content_type"] == "application/pdf"


def test_http_errors_schemes_and_types_are_invalid_input(server: str) -> None:
    with pytest.raises(InvalidInput, match="HTTP 404"):
        fetch_url(f"{server}/missing", allow_private=True)
    with pytest.raises(InvalidInput, match="unsupported content type 'application/octet-stream'"):
        fetch_url(f"{server}/blob", allow_private=True)
    for bad in ("ftp://example.com/x", "file:///etc/passwd", "javascript:alert(1)"):
        with pytest.raises(InvalidInput, match="only http and https"):
            fetch_url(bad)
    with pytest.raises(InvalidInput, match="no host"):
        fetch_url("http:///path")
    with pytest.raises(InvalidInput, match="cannot resolve"):
        fetch_url("http://does-not-exist.invalid/")
    with pytest.raises(InvalidInput, match="could not connect"):
        fetch_url("http://127.0.0.1:9/", allow_private=True)


def test_canonical_url() -> None:
    assert canonical_url("HTTP://Example.COM:80/a?b=1#frag") == "http://example.com/a?b=1"


def test_https_keeps_the_host_name_for_sni_while_connecting_to_the_checked_ip() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, headers={"Content-Type": "text/plain"}, content=b"hello")

    doc = fetch_url(
        "https://docs.example:8443/a.txt",
        resolver=_public_resolver({"docs.example": ["93.184.216.34"]}),
        transport=httpx.MockTransport(handler),
    )
    assert doc.text == "hello" and doc.source_id == "https://docs.example:8443/a.txt"
    (request,) = seen
    assert str(request.url) == "https://93.184.216.34:8443/a.txt"
    assert request.headers["host"] == "docs.example:8443"
    assert request.extensions["sni_hostname"] == "docs.example"
