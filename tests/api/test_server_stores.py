"""The HTTP API on the server stores: pgvector on a real PostgreSQL, and the Qdrant
server provider in qdrant-client's local mode (the only Qdrant offline here)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.errors import InvalidInput
from ragline.facade import Ragline
from ragline.settings import Settings
from tests.api.helpers import add, doc, local_client, make_collection


@pytest.fixture(scope="module")
def postgres_dsn() -> Iterator[str]:
    from ragline.testing.postgres import postgres_server

    with postgres_server() as dsn:
        yield dsn


def _settings(tmp_path: Path, store: str, config: dict[str, object]) -> Settings:
    return Settings(data_dir=tmp_path / "data", store=store,  # type: ignore[call-arg]
                    store_options=config, _env_file=None)


def _exercise(client: TestClient) -> None:
    make_collection(client, "c")
    add(client, "c", [doc(i, g=i % 3, flag=i % 2 == 0) for i in range(12)])
    r = client.post("/collections/c/search", json={"embedding": doc(4)["embedding"], "limit": 3,
                                                  "where": {"g": 1}})
    assert r.status_code == 200, r.text
    hits = r.json()["results"]
    assert hits[0]["id"] == "d4" and all(h["metadata"]["g"] == 1 for h in hits)
    listed = client.get("/collections/c/documents", params={"where": '{"flag": true}'}).json()
    assert listed["total"] == 6
    assert client.delete("/collections/c").status_code in (200, 204)
    assert client.get("/collections/c").status_code == 404


def test_api_on_pgvector(tmp_path: Path, postgres_dsn: str) -> None:
    s = _settings(tmp_path, "pgvector", {"dsn": postgres_dsn,
                                         "db_schema": f"api_{uuid.uuid4().hex[:8]}"})
    with local_client(create_app(s)) as client:
        _exercise(client)


def test_api_on_qdrant_local_mode(tmp_path: Path) -> None:
    s = _settings(tmp_path, "qdrant", {"location": ":memory:"})
    with local_client(create_app(s)) as client:
        _exercise(client)


def test_bad_store_config_names_fields_not_values(tmp_path: Path) -> None:
    s = _settings(tmp_path, "pgvector", {"dsn": "postgresql://u:sekret@h/db", "pool_size": 0})
    with pytest.raises(InvalidInput) as info:
        Ragline(s).start()
    assert "pool_size" in info.value.message and "sekret" not in info.value.message
