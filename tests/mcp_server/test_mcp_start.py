"""``/mcp`` starts its server on the first authenticated request, not at start-up: a
server that never serves MCP never imports the SDK (~1.2 s of its start-up), and
concurrent first requests start it once."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP tests need the 'mcp' package (ragline[mcp])")

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import json, sys, threading
    from pathlib import Path
    from fastapi.testclient import TestClient
    from ragline.api.app import create_app
    from ragline.api.mcp_server import http as mcp_http
    from ragline.facade import Ragline
    from tests.ingestion_support import fake_settings

    starts = []
    real = mcp_http._import_sdk
    def counted():
        starts.append(1)
        return real()
    mcp_http._import_sdk = counted

    rl = Ragline(fake_settings(Path(sys.argv[1]), auth="on"))
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}
    accept = {"accept": "application/json, text/event-stream"}
    out = {}
    with TestClient(create_app(ragline=rl), base_url="http://127.0.0.1:8000") as client:
        out["after_start"] = "mcp" in sys.modules
        r = client.post("/mcp", json=init, headers=accept)
        out["anonymous"] = [r.status_code, "mcp" in sys.modules]
        key = rl.keys.create(rl.owner(), "admin", "default")[1]
        auth = {**accept, "authorization": f"Bearer {key}"}
        codes = []
        def call():
            r = client.post("/mcp", json=init, headers=auth)
            codes.append((r.status_code, r.json()["result"]["serverInfo"]["name"]))
        threads = [threading.Thread(target=call) for _ in range(4)]
        for t in threads: t.start()
        for t in threads: t.join()
        out["first_calls"] = sorted(codes)
        out["starts"] = len(starts)
        r = client.post("/mcp", json=init, headers=auth)
        out["later"] = [r.status_code, len(starts)]
    print(json.dumps(out))
""")


def test_mcp_starts_on_the_first_authenticated_request_and_only_once(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["after_start"] is False  # the SDK is not imported by start-up
    assert got["anonymous"] == [401, False]  # nor by a request without a key
    assert got["first_calls"] == [[200, "ragline"]] * 4
    assert got["starts"] == 1  # four concurrent first requests, one start
    assert got["later"] == [200, 1]
