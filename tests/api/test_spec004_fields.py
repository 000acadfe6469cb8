"""Spec 004's fields and filters (issue 37 item 5): ``book_id`` on every ingested chunk
(frontmatter, then the ingestion root), filterable and payload-indexed; the file hash
under spec 004's name ``source_file_hash`` (``source_hash`` still there); the ``module``
filter in its string and numeric forms; ``/context/{id}`` without ``?collection=``
finding the chunk's collection, or a 400 naming the parameter when several hold it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.facade import Ragline
from tests.api.helpers import local_client
from tests.ingestion_support import (
    SENSING,
    by_parent,
    copy_book,
    fake_settings,
    ingest_tree,
    sid,
    stored,
)

MOTION = """---
title: Moving a robot
book_id: motion-book
hardware_tier: 2
---
# Moving a robot

## Wheels

Differential drive robots steer by turning their wheels at different speeds.
"""


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    book = copy_book(tmp_path, "robolearn")
    extra = tmp_path / "extra" / "module-2-motion" / "chapter-1-wheels"
    extra.mkdir(parents=True)
    (extra / "01-moving.md").write_text(MOTION)
    with local_client(create_app(fake_settings(tmp_path))) as c:
        rl = rl_of(c)
        ingest_tree(rl, "book", "default", book)
        ingest_tree(rl, "notes", "default", tmp_path / "extra")
        yield c


def rl_of(client: TestClient) -> Ragline:
    rl: Ragline = client.app.state.ragline  # type: ignore[attr-defined]
    return rl


def search(client: TestClient, **body: Any) -> list[dict[str, Any]]:
    r = client.post("/search", json={"query": "how do robots sense or move?", "limit": 20,
                                     **body})
    assert r.status_code == 200, r.text
    return list(r.json()["results"])


def test_book_id_from_the_root_or_the_frontmatter_on_every_chunk(client: TestClient) -> None:
    rl = rl_of(client)
    book = stored(rl, "book")
    assert book and {r.metadata["book_id"] for r in book} == {"robolearn"}
    notes = stored(rl, "notes")
    assert notes and {r.metadata["book_id"] for r in notes} == {"motion-book"}
    # filterable, and an unknown book matches nothing instead of being ignored
    assert {h["metadata"]["book_id"] for h in search(client, book_id="robolearn")} == {
        "robolearn"}
    assert search(client, book_id="motion-book") == []
    assert search(client, collection="notes", book_id="motion-book")
    # payload-indexed (as a keyword) in the embedded store
    info = rl.services.collections.get("book")
    kinds = json.loads((rl.settings.shards_dir() / info.shard / "ragline_fields.json")
                       .read_text())
    assert kinds["book_id"] == "keyword" and kinds["source_file_hash"] == "keyword"


def test_source_file_hash_is_the_files_sha256_and_source_hash_stays(
        client: TestClient, tmp_path: Path) -> None:
    chunks = by_parent(stored(rl_of(client), "book"))[sid(SENSING)]
    digest = hashlib.sha256((tmp_path / "robolearn" / SENSING).read_bytes()).hexdigest()
    assert {c.metadata["source_file_hash"] for c in chunks} == {digest}
    assert {c.metadata["source_hash"] for c in chunks} == {digest}
    where = {"where": {"source_file_hash": digest}}
    assert {h["metadata"]["parent_doc_id"] for h in search(client, **where)} == {sid(SENSING)}


@pytest.mark.parametrize("module", [1, "1", "module-1", "module-1-foundations"])
def test_module_filter_in_every_spec_form(client: TestClient, module: Any) -> None:
    hits = search(client, module=module)
    assert hits and {h["metadata"]["module"] for h in hits} == {1}


@pytest.mark.parametrize("module", [2, "2", "module-2-motion", "module-3"])
def test_module_filter_excludes_other_modules(client: TestClient, module: Any) -> None:
    assert search(client, module=module) == []


def test_context_finds_the_chunks_collection(client: TestClient) -> None:
    rl = rl_of(client)
    (chunk,) = [r for r in stored(rl, "notes") if r.metadata["chunk_index"] == 0]
    r = client.get(f"/context/{chunk.id}")  # not in the default collection "book"
    assert r.status_code == 200, r.text
    assert r.json()["chunk"]["id"] == chunk.id
    first = by_parent(stored(rl, "book"))[sid(SENSING)][0]
    assert client.get(f"/context/{first.id}").json()["chunk"]["id"] == first.id
    assert client.get("/context/00000000-0000-0000-0000-000000000000").status_code == 404


def test_context_in_several_collections_is_400_naming_the_parameter(
        client: TestClient, tmp_path: Path) -> None:
    rl = rl_of(client)
    ingest_tree(rl, "copy", "default", tmp_path / "extra")
    (chunk,) = [r for r in stored(rl, "notes") if r.metadata["chunk_index"] == 0]
    r = client.get(f"/context/{chunk.id}")
    assert r.status_code == 400
    assert "'collection'" in r.json()["message"] and "copy, notes" in r.json()["message"]
    ok = client.get(f"/context/{chunk.id}", params={"collection": "copy"})
    assert ok.status_code == 200
