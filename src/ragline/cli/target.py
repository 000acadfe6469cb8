"""Where a CLI command acts: a running server (through ``ragline.client``) or a data
directory opened in this process (through the ``Ragline`` facade).

The choice, in order:

1. ``--url`` (or ``$RAGLINE_URL``, or the ``url`` of the ``--profile``): that server;
2. a ``ragline serve`` holding the data directory (its lock file names the address):
   that server, so the CLI works while the server runs instead of failing on the lock;
3. otherwise the data directory itself, opened here.

The key for a server is ``--api-key``, else ``$RAGLINE_API_KEY``, else the profile's
``api_key``, else (for the server holding the data directory) the ``admin-key.txt`` it
wrote there. Both targets answer with the models of ``ragline.client.models``, so a
command prints the same JSON whichever it used.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ragline.client import Client
from ragline.client import models as m
from ragline.core.principal import Principal, Role
from ragline.errors import ConfigError
from ragline.facade import (
    DocumentInput,
    Job,
    Ragline,
    SearchRequest,
    holder_address,
    job_counters,
    job_progress,
)
from ragline.settings import Settings

PROFILES_FILE = Path("~/.config/ragline/profiles.toml")


@dataclass(frozen=True)
class Connection:
    """The connection options every client command takes."""

    url: str | None = None
    api_key: str | None = None
    tenant: str | None = None
    profile: str | None = None
    profiles_file: Path | None = None
    timeout: float = 60.0


def read_profile(conn: Connection) -> dict[str, Any]:
    """``[profiles.NAME]`` of the profiles file (``url``, ``api_key``, ``tenant``); ``{}``
    when no profile is asked for and the file has no ``default``."""
    path = (conn.profiles_file or PROFILES_FILE).expanduser()
    if not path.is_file():
        if conn.profile:
            raise ConfigError(f"Profile '{conn.profile}' asked for, but there is no profiles "
                              f"file ({path.name})")
        return {}
    try:
        profiles = tomllib.loads(path.read_text(encoding="utf-8")).get("profiles", {})
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"The profiles file is not valid TOML: {exc}") from exc
    name = conn.profile or "default"
    profile = profiles.get(name)
    if profile is None:
        if conn.profile:
            raise ConfigError(f"No profile '{name}' in the profiles file (known: "
                              f"{', '.join(sorted(profiles)) or 'none'})")
        return {}
    unknown = set(profile) - {"url", "api_key", "tenant", "timeout"}
    if unknown:
        raise ConfigError(f"profiles.{name}: unknown key(s) {', '.join(sorted(unknown))}")
    return dict(profile)


def server_for(conn: Connection, data_dir: Path) -> tuple[str, str | None, str | None] | None:
    """(url, key, tenant) of the server to use, or None to open ``data_dir`` here."""
    profile = read_profile(conn)
    url = conn.url or profile.get("url")
    key = conn.api_key or profile.get("api_key")
    tenant = conn.tenant or profile.get("tenant")
    if not url:
        url = reachable(holder_address(data_dir))
        if url and key is None:
            key_file = data_dir / "admin-key.txt"
            if key_file.is_file():
                key = key_file.read_text(encoding="utf-8").strip() or None
    return (str(url), key, tenant) if url else None


def reachable(address: str | None) -> str | None:
    """The holder's address as a client can dial it: a server bound to every interface
    (``0.0.0.0``, ``::``) is reached on the loopback."""
    if not address:
        return None
    scheme, _, rest = address.partition("://")
    host, _, port = rest.rpartition(":")
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host.strip("[]") in ("::", ""):
        host = "[::1]"
    return f"{scheme}://{host}:{port}"


class LocalTarget:
    """A data directory opened in this process, answering like ``ragline.client.Client``
    (the operations the CLI uses) and acting as the directory's owner: in its default
    tenant, or in ``tenant`` (``--as-tenant``; ``*``: the shared corpus), as an admin key
    naming it does over HTTP."""

    def __init__(self, rl: Ragline, tenant: str | None = None) -> None:
        self.rl = rl
        self.me = rl.owner() if tenant is None else Principal(
            tenant=tenant, role=Role.ADMIN, name="local", local=True)
        self.where = str(rl.settings.data_dir)

    # -- collections --------------------------------------------------------------------
    def list_collections(self) -> list[m.Collection]:
        return [m.Collection(**asdict(c)) for c in self.rl.collections.all(self.me)]

    def get_collection(self, name: str) -> m.Collection:
        return m.Collection(**asdict(self.rl.collections.get(self.me, name)))

    def create_collection(self, name: str, metadata: Mapping[str, Any] | None = None, *,
                          embed_provider: str | None = None,
                          embed_model: str | None = None) -> m.Collection:
        embed = {"provider": embed_provider, "model": embed_model} if embed_provider else None
        view = self.rl.collections.create(self.me, name, dict(metadata) if metadata else None,
                                         None, None, embed)
        return m.Collection(**asdict(view), status="created")

    def delete_collection(self, name: str) -> str:
        return self.rl.collections.delete(self.me, name)

    def empty_collection(self, name: str) -> m.DocumentsDeleted:
        return m.DocumentsDeleted(collection=name, status="emptied",
                                  count_deleted=self.rl.collections.empty(self.me, name))

    # -- documents ------------------------------------------------------------------------
    def list_documents(self, name: str, *, where: Mapping[str, Any] | None = None,
                       limit: int = 100, offset: int = 0) -> m.DocumentPage:
        page = self.rl.documents.page(self.me, name, dict(where) if where else None, limit,
                                      offset)
        docs = [m.Document(id=r.id, text=r.text, metadata=r.metadata) for r in page.records]
        return m.DocumentPage(documents=docs, count=len(docs), total=page.total)

    def get_document(self, name: str, doc_id: str) -> m.Document:
        r = self.rl.documents.get(self.me, name, doc_id)
        return m.Document(id=r.id, text=r.text, metadata=r.metadata)

    def add_documents(self, name: str,
                      documents: Sequence[Mapping[str, Any]]) -> m.DocumentsAdded:
        docs = [DocumentInput(d.get("text", ""), d.get("metadata"), d.get("embedding"),
                              d.get("id")) for d in documents]
        ids = self.rl.documents.add(self.me, name, docs)
        return m.DocumentsAdded(status="success", collection=name, count=len(ids), ids=ids)

    def delete_documents(self, name: str, ids: Sequence[str] | None = None,
                         where: Mapping[str, Any] | None = None) -> m.DocumentsDeleted:
        n = self.rl.documents.delete(self.me, name, list(ids) if ids is not None else None,
                                     dict(where) if where is not None else None)
        return m.DocumentsDeleted(status="deleted", collection=name, count_deleted=n)

    # -- sources --------------------------------------------------------------------------
    def list_sources(self, collection: str, *, limit: int = 100,
                     offset: int = 0) -> m.SourceList:
        found, total = self.rl.documents.sources(self.me, collection, limit, offset)
        rows = [m.Source(**asdict(s)) for s in found]
        return m.SourceList(sources=rows, count=len(rows), total=total)

    def get_source(self, collection: str, source_id: str) -> m.SourceDetail:
        return m.SourceDetail(**asdict(self.rl.documents.source(self.me, collection, source_id)))

    def delete_source(self, collection: str, source_id: str) -> m.SourceDeleted:
        n = self.rl.documents.delete_source(self.me, collection, source_id)
        return m.SourceDeleted(collection=collection, source_id=source_id, count_deleted=n,
                               status="deleted")

    # -- search ---------------------------------------------------------------------------
    def search(self, collection: str | None = None, query: str | None = None, *,
               limit: int = 10, where: Mapping[str, Any] | None = None,
               mode: str | None = None, **options: Any) -> m.SearchResult:
        res = self.rl.search.query_sync(self.me, SearchRequest(
            collection=collection, query=query, limit=limit,
            where=dict(where) if where else None, mode=mode, **options))  # type: ignore[arg-type]
        hits = [m.SearchHit(id=h.id, text=h.text, metadata=h.metadata, score=h.score,
                            **h.context) for h in res.hits]
        return m.SearchResult(results=hits, mode=res.mode, took_ms=round(res.took_ms, 2),
                              stages=res.stages, warnings=res.warnings,
                              collection=res.collection)

    # -- answers --------------------------------------------------------------------------
    def chat(self, message: str, *, conversation_id: str | None = None,
             collection: str | None = None) -> m.ChatAnswer:
        """``POST /api/chat`` with ``stream: false``: one turn in this process."""
        async def turn() -> dict[str, Any]:
            return await self.rl.answers.chat(self.me, message, conversation_id=conversation_id,
                                      collection=collection)
        return m.ChatAnswer(**self.rl.call_sync(turn))

    # -- jobs -----------------------------------------------------------------------------
    def jobs(self, *, limit: int = 20, collection: str | None = None) -> list[m.Job]:
        return [job_model(j) for j in self.rl.ingestion.jobs(self.me, limit, collection)]

    def job(self, job_id: str) -> m.Job:
        return job_model(self.rl.ingestion.job(self.me, job_id))

    def rerun_job(self, job_id: str) -> m.JobStarted:
        job = self.rl.ingestion.rerun(self.me, job_id)
        return m.JobStarted(job_id=job.id, status=job.status, rerun_of=job_id)

    def wait_for_job(self, job_id: str, *, timeout: float | None = None,
                     interval: float = 0.5) -> m.Job:
        return job_model(self.rl.ingestion.wait(self.me, job_id, timeout))

    # -- keys -----------------------------------------------------------------------------
    def create_key(self, role: str, tenant: str, name: str = "") -> m.CreatedKey:
        rec, key = self.rl.keys.create(self.me, role, tenant, name)
        return m.CreatedKey(**asdict(rec), key=key)

    def list_keys(self) -> list[m.ApiKey]:
        return [m.ApiKey(**asdict(k)) for k in self.rl.keys.all(self.me)]

    def revoke_key(self, key_id: str) -> m.ApiKey:
        return m.ApiKey(**asdict(self.rl.keys.revoke(self.me, key_id)), status="revoked")


def job_model(job: Job) -> m.Job:
    """A job as ``GET /ingestion/status/{id}`` shows it."""
    return m.Job(job_id=job.id, status=job.status, mode=job.mode, kind=job.kind,
                 trigger=job.trigger, collection=job.collection, path=job.path,
                 restricted_paths=job.restricted_paths, created_at=job.created_at,
                 started_at=job.started_at, finished_at=job.finished_at,
                 duration_s=job.duration_s, error=job.error, warnings=job.warnings,
                 result=job.result, **{**job_counters(job), **job_progress(job)})


class ServerTarget(Client):
    """A server: the client itself, plus where it points (for messages)."""

    @property
    def where(self) -> str:
        return self.base_url


Target = ServerTarget | LocalTarget


@contextmanager
def open_target(conn: Connection, settings: Settings) -> Iterator[Target]:
    """The server to use, or the data directory opened here (closed on exit)."""
    server = server_for(conn, settings.data_dir)
    if server is not None:
        url, key, tenant = server
        client = ServerTarget(url, api_key=key, tenant=tenant, timeout=conn.timeout)
        try:
            yield client
        finally:
            client.close()
        return
    with Ragline(settings) as rl:
        yield LocalTarget(rl, conn.tenant)
