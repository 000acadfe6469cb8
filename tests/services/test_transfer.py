"""``ragline export`` / ``import``: an embedded data directory (SQLite + Qdrant Edge) moved
to the scaled-out setup (PostgreSQL catalog + pgvector on a real PostgreSQL)."""

from __future__ import annotations

import io
import math
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragline.core.principal import Principal
from ragline.errors import CollectionExists, InvalidInput
from ragline.facade import DocumentInput, IngestSource, Ragline, SearchRequest
from tests.ingestion_support import copy_book, fake_settings


@pytest.fixture(scope="module")
def dsn() -> Iterator[str]:
    from ragline.testing.postgres import postgres_server

    with postgres_server() as uri:
        yield uri


def _vec(i: int) -> list[float]:
    return [1.0, math.sin(i), math.cos(i * 1.7), i / 1200]  # no two alike: no ties


def test_an_embedded_directory_moves_to_postgres_with_its_vectors(tmp_path: Path,
                                                                 dsn: str) -> None:
    acme = Principal.owner("acme")
    with Ragline(fake_settings(tmp_path / "embedded")) as src:
        me = src.owner()
        src.keys.create(me, "user", "acme", "names the tenant")  # so the export finds it
        src.collections.create(me, "notes", {"team": "x"})
        src.documents.add(me, "notes", [DocumentInput(f"note {i}", {"i": i, "tags": ["a"]},
                                                      _vec(i), f"n{i}") for i in range(1200)])
        src.documents.add(acme, "notes", [DocumentInput("acme only", {"i": -1}, _vec(3), "x")])
        src.ingestion.submit(me, IngestSource("directory", path=str(copy_book(tmp_path))),
                             wait=True)
        buf = io.StringIO()
        counts = src.admin.export(me, buf)
        query = SearchRequest(collection="notes", embedding=_vec(5), limit=5)
        before = [h.id for h in src.search.query_sync(me, query).hits]
        book_before = src.search.query_sync(me, SearchRequest(collection="book", query="camera",
                                                         limit=3)).hits
    assert counts["documents"]["notes"] == {"acme": 1, "default": 1200}
    assert counts["documents"]["book"]["default"] > 6

    schema = f"t_{uuid.uuid4().hex[:8]}"
    target = fake_settings(tmp_path / "scaled", catalog="postgres",
                           catalog_options={"dsn": dsn, "db_schema": schema},
                           store="pgvector", store_options={"dsn": dsn,
                                                            "db_schema": f"{schema}_v"})
    with Ragline(target) as dst:
        me = dst.owner()
        got = dst.admin.import_(me, io.StringIO(buf.getvalue()))
        assert got["documents"] == {c: {t: n for t, n in per.items() if n}
                                    for c, per in counts["documents"].items()}
        assert dst.collections.get(me, "notes").metadata == {"team": "x"}
        assert dst.collections.get(me, "notes").count == 1200
        assert dst.collections.get(acme, "notes").count == 1
        doc = dst.documents.get(me, "notes", "n7")
        assert (doc.text, doc.metadata) == ("note 7", {"i": 7, "tags": ["a"]})
        query = SearchRequest(collection="notes", embedding=_vec(5), limit=5)
        after = [h.id for h in dst.search.query_sync(me, query).hits]
        assert after == before  # the same vectors
        book = dst.collections.get(me, "book")
        assert book.embed == {"provider": "fake", "model": book.embed["model"]} \
            if book.embed else False
        # a text query embeds with the collection's embedder: the top hit is the same
        hits = dst.search.query_sync(me, SearchRequest(collection="book", query="camera",
                                                 limit=3)).hits
        assert hits[0].id == book_before[0].id
        with pytest.raises(CollectionExists):  # an import never merges into a collection
            dst.admin.import_(me, io.StringIO(buf.getvalue()))
        with pytest.raises(InvalidInput, match="ragline-export"):
            dst.admin.import_(me, io.StringIO('{"format": "other"}\n'))
