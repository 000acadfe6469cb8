"""The start-up banner: where the server is, where its data is, who may call it.

Printed once by ``ragline serve`` so a newcomer sees at a glance which URL to
open and which directory holds their data, and an operator sees whether the
port is open to anyone. Pure: built from plain values so it is easy to test.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


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


def base_url(host: str, port: int) -> str:
    """A URL a browser on this machine can open (0.0.0.0 and :: are not addresses)."""
    shown = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    return f"http://{shown}:{port}"


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
        ("Health", f"{url}/health   Metrics: {url}/metrics   Version: {url}/version"),
        ("Logs", f.log_format),
    ]
    if f.config_file is not None:
        rows.append(("Config", str(f.config_file)))
    lines = [f"ragline {f.version}"]
    lines += [f"  {k:<8} {v}" for k, v in rows]
    if f.first_admin_key:
        saved = f" and saved (readable by you only) in {f.admin_key_file}" \
            if f.admin_key_file else ""
        lines += ["", f"  First start: an admin API key was created. It is shown only now{saved}:",
                  "", f"    {f.first_admin_key}", "",
                  f"  Try: curl -H 'Authorization: Bearer {f.first_admin_key}' {url}/collections"]
    width = max(len(line) for line in lines)
    bar = "-" * min(width, 100)
    return "\n".join([bar, *lines, bar])
