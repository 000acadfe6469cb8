"""Reaching Chroma for :class:`~ragline.providers.stores.chroma.provider.ChromaStore`:
the client (in-process or HTTP, with the tenant and database created when asked),
the names of a shard's collections, Chroma's and the transport's errors as ragline's
(no paths, hosts or headers in them), health, and the size of collections."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ragline.core.filters import Node
from ragline.errors import RaglineError, ShardGone, StoreError, StoreUnavailable
from ragline.providers.base import Health
from ragline.providers.stores.chroma.config import ChromaConfig
from ragline.providers.stores.chroma.encoding import to_where

log = logging.getLogger(__name__)

DIM_KEY = "ragline_dim"  # a collection's metadata key holding its dimension


def collection_name(prefix: str, key: str, tenant: str | None = None) -> str:
    """The marker collection of shard ``key`` (tenant None) or its tenant's collection."""
    if not key or not key.isascii() or not all(ch.isalnum() or ch in "_-" for ch in key) \
            or not key[-1].isalnum():
        raise StoreError(f"bad shard key {key!r}")
    base = f"{prefix}{key}"
    if tenant is None:
        return base
    return f"{base}.t{hashlib.sha256(tenant.encode('utf-8')).hexdigest()[:24]}"


def chromadb_module() -> Any:
    """chromadb, imported on first use: it is an extra (``ragline[chroma]``)."""
    try:
        import chromadb
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise StoreError("The chroma store needs the 'chroma' extra: "
                         "pip install 'ragline[chroma]'") from exc
    return chromadb


def connect(c: ChromaConfig) -> Any:
    """A Chroma client for the configured directory (in-process) or server."""
    chromadb = chromadb_module()
    settings = chromadb.Settings(anonymized_telemetry=False)
    if c.create_database:
        _ensure_database(chromadb, c)
    with calls("connect"):
        if c.path is not None:
            Path(c.path).mkdir(parents=True, exist_ok=True)
            return chromadb.PersistentClient(path=str(c.path), settings=settings,
                                             tenant=c.tenant, database=c.database)
        return chromadb.HttpClient(
            host=c.host, port=c.port, ssl=c.ssl, settings=settings,
            headers={k: v.get_secret_value() for k, v in c.headers.items()},
            tenant=c.tenant, database=c.database)


def _ensure_database(chromadb: Any, c: ChromaConfig) -> None:
    with calls("database check"):
        if c.path is not None:
            Path(c.path).mkdir(parents=True, exist_ok=True)
            admin = chromadb.AdminClient(chromadb.Settings(
                anonymized_telemetry=False, is_persistent=True,
                persist_directory=str(c.path)))
        else:
            admin = chromadb.AdminClient(chromadb.Settings(
                anonymized_telemetry=False,
                chroma_api_impl="chromadb.api.fastapi.FastAPI",
                chroma_server_host=c.host, chroma_server_http_port=c.port,
                chroma_server_ssl_enabled=c.ssl,
                chroma_server_headers={k: v.get_secret_value()
                                       for k, v in c.headers.items()}))
        errors = chromadb.errors
        try:
            try:
                admin.get_tenant(c.tenant)
            except errors.NotFoundError:
                admin.create_tenant(c.tenant)
            try:
                admin.get_database(c.database, tenant=c.tenant)
            except errors.NotFoundError:
                admin.create_database(c.database, tenant=c.tenant)
        finally:
            with contextlib.suppress(Exception):
                admin.close()


@contextlib.contextmanager
def calls(what: str) -> Iterator[None]:
    """Chroma and transport errors as ragline errors (no paths, hosts or headers)."""
    try:
        yield
    except RaglineError:
        raise
    except Exception as exc:
        raise translate(exc, what) from exc


def where_of(where: Node | None) -> dict[str, Any] | None:
    return None if where is None else to_where(where)


def missing(exc: BaseException) -> bool:
    """Whether a Chroma error says the collection does not exist."""
    errors = chromadb_module().errors
    return isinstance(exc, errors.NotFoundError) or (
        isinstance(exc, errors.ChromaError | ValueError) and "does not exist" in str(exc))


def translate(exc: BaseException, what: str) -> RaglineError:
    if isinstance(exc, RaglineError):
        return exc
    if missing(exc):
        return ShardGone("The collection was emptied or deleted while this request ran; "
                         "retry it")
    if isinstance(exc, ConnectionError) or _is_transport(exc) or (
            isinstance(exc, ValueError) and "Could not connect" in str(exc)):
        return StoreUnavailable("The Chroma server cannot be reached")
    log.warning("chroma %s failed: %s: %s", what, type(exc).__name__, exc)
    return StoreError(f"Chroma {what} failed ({type(exc).__name__})")


def _is_transport(exc: BaseException) -> bool:
    try:
        import httpx
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, httpx.TransportError)


def health_of(client: Any, c: ChromaConfig, shard_keys: Callable[[], list[str]]) -> Health:
    """The store's health: Chroma's heartbeat and version, and how many shards it holds."""
    chromadb = chromadb_module()
    details: dict[str, Any] = {"engine": "chroma", "mode": c.mode,
                               "client_version": chromadb.__version__,
                               "tenant": c.tenant, "database": c.database}
    try:
        details["heartbeat_ns"] = int(client.heartbeat())
        details["version"] = str(client.get_version())
        details["collection_count"] = len(shard_keys())
        details["chroma_collection_count"] = int(client.count_collections())
    except Exception as exc:
        return Health.now("down", details,
                          error=f"Chroma does not answer ({type(exc).__name__})")
    return Health.now("ok", details)


def size_of(client: Any, c: ChromaConfig, names: list[str]) -> int:
    """Bytes of the named collections. In-process: their segment directories plus their
    rows in Chroma's SQLite file. Server: an estimate (vectors plus 256 bytes a record),
    since Chroma's API has no size call."""
    total = 0
    for name in names:
        try:
            col = client.get_collection(name, embedding_function=None)
        except Exception as exc:
            if missing(exc):
                continue
            raise translate(exc, "get collection") from exc
        if c.path is not None:
            with contextlib.suppress(Exception):
                total += local_size(Path(c.path), str(col.id))
                continue
        with calls("count"):
            n = int(col.count())
        total += n * (4 * int((col.metadata or {}).get(DIM_KEY) or 0) + 256)
    return total


def local_size(root: Path, collection_id: str) -> int:
    """Bytes of one collection in an in-process Chroma directory (read-only look at
    Chroma's SQLite catalog for the collection's segments)."""
    db = root / "chroma.sqlite3"
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1.0)
    try:
        segs = [r[0] for r in con.execute(
            "SELECT id FROM segments WHERE collection = ?", (collection_id,))]
        rows = con.execute(
            "SELECT COALESCE(SUM(LENGTH(m.string_value)), 0) + COUNT(*) * 24 "
            "FROM embedding_metadata m JOIN embeddings e ON e.id = m.id "
            f"WHERE e.segment_id IN ({','.join('?' * len(segs))})", segs).fetchone()
        meta_bytes = int(rows[0] or 0) if segs else 0
    finally:
        con.close()
    files = sum(int(f.stat().st_blocks) * 512 for s in segs if (root / s).is_dir()
                for f in (root / s).rglob("*") if f.is_file())
    return int(files) + meta_bytes
