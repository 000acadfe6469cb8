"""Shared helpers for the ingestion pipeline, job, webhook and endpoint tests.

The fake embedder (a hashed bag of words) counts every call and text, which is
what lets the tests assert exact numbers of embeddings.

It is also a pytest plugin (``tests/conftest.py`` loads it), so its fixtures need no
import: ``book`` (a fresh copy of the fixture book), ``rl`` (a started ``Ragline`` on
a temporary data directory; a module tunes its settings by redefining ``rl_overrides``)
and ``few_payload_indexes``.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragline.core.principal import Principal
from ragline.core.types import Record
from ragline.facade import IngestSource, IngestStats, Ragline
from ragline.providers.registry import registry
from ragline.settings import Settings
from ragline.testing.fake_embedder import FakeEmbedder

BOOK = Path(__file__).resolve().parent / "fixtures" / "book"
SENSING = "module-1-foundations/chapter-1-sensing/01-how-robots-sense.md"
BROKEN = "module-1-foundations/chapter-1-sensing/02-broken-frontmatter.md"
CODE = "module-1-foundations/chapter-2-code/01-code-and-tables.md"
MDX = "module-1-foundations/chapter-2-code/02-components.mdx"
CHUNK_TOKENS = 60

registry.register("embedders", "fake", FakeEmbedder)


@pytest.fixture
def few_payload_indexes() -> Iterator[None]:
    """Let the Edge store index at most 4 metadata fields in these tests.

    Qdrant Edge takes 0.2-0.5 s per payload index it creates, and a fresh book
    collection has ~30 metadata fields: without this every test would spend
    ~10 s creating indexes that ingestion correctness does not depend on
    (filters scan payloads without them). The end-to-end test with the real
    model and the benchmark keep the store's normal policy.
    """
    from ragline.providers.stores.qdrant_common import fields

    saved = fields.MAX_INDEXED_FIELDS
    fields.MAX_INDEXED_FIELDS = 4
    try:
        yield
    finally:
        fields.MAX_INDEXED_FIELDS = saved


@pytest.fixture
def book(tmp_path: Path) -> Path:
    """A fresh copy of the fixture book, free to edit."""
    return copy_book(tmp_path)


@pytest.fixture
def rl_overrides() -> dict[str, Any]:
    """Settings overrides for ``rl``: a test module redefines this fixture to tune it."""
    return {}


@pytest.fixture
def rl(tmp_path: Path, rl_overrides: dict[str, Any]) -> Iterator[Ragline]:
    """A started ragline over ``fake_settings(tmp_path, **rl_overrides)``."""
    with Ragline(fake_settings(tmp_path, **rl_overrides)) as r:
        yield r


def ingest_tree(rl: Ragline, collection: str, tenant: str, path: str | Path,
                mode: str = "incremental", *, paths: list[str] | None = None) -> IngestStats:
    """A directory ingestion through the door, as the CLI runs it (``wait=True``: the job
    runs in this thread), acting as the owner in ``tenant``; the job's counters and
    warnings as the run's stats. A failed job raises :class:`JobFailed` with its error."""
    out = rl.ingestion.submit(Principal.owner(tenant), IngestSource(
        "directory", collection, path=str(path), mode=mode, paths=paths), wait=True)
    assert out.job is not None
    if out.job.status != "succeeded":
        raise JobFailed(out.job.error or out.job.status)
    return IngestStats(**out.job.counters, warnings=list(out.job.warnings))


class JobFailed(AssertionError):
    """A directory job of :func:`ingest_tree` that did not succeed."""


class Boom(RuntimeError):
    """The crash a test injects (never raised by ragline itself)."""


def sid(rel: str) -> str:
    """The source id (``parent_doc_id``) of a relative path."""
    return rel.rsplit(".", 1)[0]


def fake_settings(tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "data_dir": tmp_path / "data", "default_embedder": "fake",
        "default_collection": "book", "ingest_chunk_tokens": CHUNK_TOKENS,
        "ingest_retry_wait_s": 0.0, "ingest_allowed_roots": [tmp_path], **overrides,
    }
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


def copy_book(tmp_path: Path, name: str = "book") -> Path:
    dest = tmp_path / name
    shutil.copytree(BOOK, dest)
    return dest


def fake_of(rl: Ragline, collection: str = "book") -> FakeEmbedder:
    """The embedder instance ingestion uses for ``collection`` (to read its counters)."""
    info = rl.services.collections.get(collection)
    assert info.embedding_provider is not None
    inner = rl.services.embedders.get(info.embedding_provider, info.embedding_model).inner
    assert isinstance(inner, FakeEmbedder)
    return inner


def stored(rl: Ragline, collection: str = "book", tenant: str = "default") -> list[Record]:
    info = rl.services.collections.get(collection)
    page = rl.services.store.list_page(info.shard, tenant, None, 10_000, 0)
    assert len(page.records) == page.total
    return page.records


def snapshot(rl: Ragline, collection: str = "book") -> dict[str, str]:
    """Every stored chunk's text by id."""
    return {r.id: r.text for r in stored(rl, collection)}


def clean_snapshot(tmp_path: Path, book: Path) -> dict[str, str]:
    """What a clean ingestion of ``book`` into a fresh data directory stores (the state a
    repair or re-ingestion must reach), as ``snapshot`` gives it."""
    with Ragline(fake_settings(tmp_path / "clean")) as clean:
        ingest_tree(clean, "book", "default", book)
        return snapshot(clean)


def by_parent(records: list[Record]) -> dict[str, list[Record]]:
    out: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        out[str(r.metadata["parent_doc_id"])].append(r)
    for chunks in out.values():
        chunks.sort(key=lambda r: int(r.metadata["chunk_index"]))  # type: ignore[arg-type]
    return dict(out)


def check_chains(records: list[Record]) -> None:
    """Every source: indexes 0..n-1, prev/next linking neighbours, nulls at the ends."""
    for parent, chunks in by_parent(records).items():
        n = len(chunks)
        assert [c.metadata["chunk_index"] for c in chunks] == list(range(n)), parent
        for i, c in enumerate(chunks):
            assert c.metadata["total_chunks"] == n
            assert c.metadata["prev_chunk_id"] == (chunks[i - 1].id if i else None)
            assert c.metadata["next_chunk_id"] == (chunks[i + 1].id if i + 1 < n else None)


def edit_section(path: Path, heading: str, new_text: str) -> None:
    """Replace the body of the ``## heading`` section of a Markdown file."""
    lines = path.read_text().split("\n")
    start = lines.index(f"## {heading}")
    end = next((j for j in range(start + 1, len(lines)) if lines[j].startswith("## ")),
               len(lines))
    lines[start + 1:end] = ["", new_text, ""]
    path.write_text("\n".join(lines))
