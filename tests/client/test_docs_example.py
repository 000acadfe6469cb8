"""docs/client.md's examples run verbatim against a live server (only the URL and the key
are the test server's), so the page cannot drift from the client."""

from __future__ import annotations

import asyncio
import contextlib
import re
import textwrap
from pathlib import Path

from tests.client.conftest import Served

DOC = Path(__file__).resolve().parents[2] / "docs" / "client.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def _for(served: Served, code: str) -> str:
    return code.replace("http://127.0.0.1:8000", served.url).replace("rl_...",
                                                                      served.admin_key)


def test_the_sync_example_runs(served: Served, capsys: object) -> None:
    sync, _ = _blocks()
    exec(compile(_for(served, sync), str(DOC), "exec"), {})
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert "n1 Rerankers read query and document together." in out


def test_the_async_example_runs(served: Served) -> None:
    from ragline.client import Client
    from ragline.errors import CollectionExists

    # the sync example's collection, so that this test also runs alone
    with Client(served.url, api_key=served.admin_key) as rl, \
            contextlib.suppress(CollectionExists):
        rl.create_collection("notes", embed_provider="local")
    _, aio = _blocks()
    body = textwrap.indent(_for(served, aio), "    ")
    scope: dict[str, object] = {}
    exec(compile(f"async def example():\n{body}\n    return page\n", str(DOC), "exec"),
         scope)
    page = asyncio.run(scope["example"]())  # type: ignore[operator]
    assert page.total == 0  # nothing in 'notes' has lang=en
