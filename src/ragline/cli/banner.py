"""The start-up banner: where the server is, where its data is, who may call it.

Printed once by ``ragline serve`` so a newcomer sees at a glance which URL to
open and which directory holds their data, whether a chat model is configured,
and an operator sees whether the port is open to anyone. Pure: built from plain
values so it is easy to test.

The first admin key goes to the terminal and the key file only, never into a log:
when the banner's output is not a terminal (redirected to a file, a journal, a
container log) the key is left out of it and written to the controlling terminal,
if the process has one (issue 32).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO


@dataclass(frozen=True)
class BannerFacts:
    version: str
    host: str
    port: int
    data_dir: Path
    collections: int
    auth: str
    console: bool = False
    log_format: str = "text"
    config_file: Path | None = None
    first_admin_key: str | None = None
    admin_key_file: Path | None = None
    chat_model: str | None = None
    """The configured chat model ("MODEL at URL"), or None: the banner says none is."""
    show_key: bool = True
    """False when the output is not a terminal (a log file, a journal): the first admin key
    is then named by its file only, never written into the output (issue 32)."""


def base_url(host: str, port: int) -> str:
    """A URL a browser on this machine can open (0.0.0.0 and :: are not addresses)."""
    shown = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    return f"http://{shown}:{port}"


def key_lines(f: BannerFacts) -> list[str]:
    """The first admin key, for a terminal only."""
    url = base_url(f.host, f.port)
    saved = f" and saved (readable by you only) in {f.admin_key_file}" \
        if f.admin_key_file else ""
    return ["", f"  First start: an admin API key was created. It is shown only now{saved}:",
            "", f"    {f.first_admin_key}", "",
            f"  Try: curl -H 'Authorization: Bearer {f.first_admin_key}' {url}/collections"]


def render(f: BannerFacts) -> str:
    url = base_url(f.host, f.port)
    listen = " (all interfaces)" if f.host in ("0.0.0.0", "", "::") else ""
    rows = [
        ("API", f"{url}{listen}"),
        ("Docs", f"{url}/docs  (ReDoc: {url}/redoc)"),
    ]
    if f.console:
        rows.append(("Console", f"{url}/ui"))
    rows += [
        ("Data", f"{f.data_dir.resolve()}  ({f.collections} collection"
                 f"{'' if f.collections == 1 else 's'})"),
        ("Auth", f.auth),
        ("Chat", f.chat_model or "no chat model configured: /api/chat answers 503 (set "
                 "RAGLINE_LLM_BASE_URL and RAGLINE_LLM_MODEL; docs/answers.md)"),
        ("Health", f"{url}/health   Metrics: {url}/metrics   Version: {url}/version"),
        ("Logs", f.log_format),
    ]
    if f.config_file is not None:
        rows.append(("Config", str(f.config_file)))
    lines = [f"ragline {f.version}"]
    lines += [f"  {k:<8} {v}" for k, v in rows]
    if f.first_admin_key and f.show_key:
        lines += key_lines(f)
    elif f.first_admin_key:
        lines += ["", "  First start: an admin API key was created and saved (readable by you "
                  f"only) in {f.admin_key_file}.",
                  "  It is not printed here: this output is not a terminal (it may be a log).",
                  f"  Try: curl -H \"Authorization: Bearer $(cat {f.admin_key_file})\" "
                  f"{url}/collections"]
    width = max(len(line) for line in lines)
    bar = "-" * min(width, 100)
    return "\n".join([bar, *lines, bar])


def open_terminal() -> TextIO | None:
    """The process's controlling terminal for writing, or None (a service, a container)."""
    try:
        return open("/dev/tty", "w", encoding="utf-8")  # closed by write()
    except OSError:
        return None


def write(f: BannerFacts, out: TextIO,
          terminal: Callable[[], TextIO | None] = open_terminal) -> None:
    """Print the banner on ``out``; the first admin key only where a person reads it."""
    if not f.first_admin_key or out.isatty():
        out.write(render(f) + "\n")
        out.flush()
        return
    out.write(render(replace(f, show_key=False)) + "\n")
    out.flush()
    tty = terminal()
    if tty is not None:
        with tty:
            tty.write("\n".join(key_lines(f)) + "\n")
