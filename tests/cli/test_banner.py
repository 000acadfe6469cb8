"""The start-up banner names the URL, the docs, the data directory and the auth state."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from ragline.cli.banner import BannerFacts, base_url, render, write


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


class _Out(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def _facts(tmp_path: Path, **kw: Any) -> BannerFacts:
    return BannerFacts(version="1", host="127.0.0.1", port=8000, data_dir=tmp_path,
                       collections=0, auth="on", first_admin_key="rk_secret",
                       admin_key_file=tmp_path / "admin-key.txt", **kw)


def test_banner_names_the_chat_model_or_says_there_is_none(tmp_path: Path) -> None:
    none = render(_facts(tmp_path))
    assert "Chat     no chat model configured" in none
    assert "RAGLINE_LLM_BASE_URL" in none and "RAGLINE_LLM_MODEL" in none
    some = render(_facts(tmp_path, chat_model="llama3.2 at http://localhost:11434/v1"))
    assert "Chat     llama3.2 at http://localhost:11434/v1" in some


def test_first_key_goes_to_a_terminal_never_to_a_redirected_output(tmp_path: Path) -> None:
    """Issue 32 item 10: stderr redirected to a log file gets the banner without the key;
    the key goes to the controlling terminal (when there is one) and the key file."""
    log, tty = _Out(tty=False), _Out(tty=True)
    tty.close = lambda: None  # type: ignore[method-assign]  # read it after write() closes
    write(_facts(tmp_path), log, terminal=lambda: tty)
    assert "rk_secret" not in log.getvalue()
    assert str(tmp_path / "admin-key.txt") in log.getvalue()
    assert "not printed here" in log.getvalue()
    assert "rk_secret" in tty.getvalue()
    # no controlling terminal (a service): the key is in the file only
    log2 = _Out(tty=False)
    write(_facts(tmp_path), log2, terminal=lambda: None)
    assert "rk_secret" not in log2.getvalue()
    # a person at a terminal sees the banner and the key together, once
    term = _Out(tty=True)
    write(_facts(tmp_path), term, terminal=lambda: pytest.fail("terminal opened twice"))
    assert term.getvalue().count("rk_secret") == 2  # the key line and the curl example


def test_served_banner_keeps_the_key_out_of_a_log_file(tmp_path: Path) -> None:
    """A real ``ragline serve`` whose stdout and stderr go to a log file (as under a
    service manager): the key file holds the first admin key, the log never does, and
    the banner says no chat model is configured."""
    from tests.live_server import LiveServer

    data = tmp_path / "data"
    srv = LiveServer(data, env={"RAGLINE_AUTH": "on"})
    try:
        srv.wait_ready()
    finally:
        srv.stop()
    key = (data / "admin-key.txt").read_text().strip()
    log = srv.log.read_text()
    assert key and key not in log
    assert "admin-key.txt" in log and "no chat model configured" in log
