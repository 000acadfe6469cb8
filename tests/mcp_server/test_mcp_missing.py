"""Without the ``mcp`` package, ``/mcp`` says which extra to install (not a bare 404)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.facade import Ragline
from tests.ingestion_support import fake_settings


def test_mcp_without_the_extra_answers_503_naming_it(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *a: Any) -> Any:
        return None if name == "mcp" else real(name, *a)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    rl = Ragline(fake_settings(tmp_path, auth="on", allowed_hosts=["testserver"])).start()
    try:
        key = rl.keys.create(rl.owner(), "admin", "default")[1]
        with TestClient(create_app(ragline=rl)) as client:
            _check(client, key)
    finally:
        rl.close()


def _check(client: TestClient, key: str) -> None:
    assert client.post("/mcp", json={}).status_code == 401  # the key first
    r = client.post("/mcp", json={}, headers={"X-API-Key": key})
    assert r.status_code == 503
    assert "ragline[mcp]" in r.json()["message"] and "make serve" in r.json()["message"]
    assert client.get("/mcp", headers={"X-API-Key": key}).status_code == 503
