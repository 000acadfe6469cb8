"""The start-up banner names the URL, the docs, the data directory and the auth state."""

from __future__ import annotations

from pathlib import Path

from ragline.cli.banner import BannerFacts, base_url, render


def test_banner_content(tmp_path: Path) -> None:
    text = render(BannerFacts(version="9.9", host="0.0.0.0", port=8123, data_dir=tmp_path,
                              collections=1, auth="off (no API keys)", console=True,
                              log_format="json"))
    assert "ragline 9.9" in text
    assert "http://127.0.0.1:8123 (all interfaces)" in text
    assert "http://127.0.0.1:8123/docs" in text and "/redoc" in text
    assert "http://127.0.0.1:8123/ui" in text
    assert f"{tmp_path.resolve()}  (1 collection)" in text
    assert "Auth     off (no API keys)" in text and "/metrics" in text


def test_banner_without_console_and_with_first_key(tmp_path: Path) -> None:
    text = render(BannerFacts(version="1", host="127.0.0.1", port=1, data_dir=tmp_path,
                              collections=0, auth="on", first_admin_key="rk_secret"))
    assert "/ui" not in text and "(0 collections)" in text and "rk_secret" in text


def test_base_url_for_ipv6() -> None:
    assert base_url("::1", 80) == "http://[::1]:80"
