"""Every plain request/answer operation of the HTTP API, written once.

Each function describes one operation as a :class:`~ragline.client.transport.Call`
(method, path, body, how to read the answer); :class:`ragline.client.Client` runs
them blocking and :class:`ragline.client.AsyncClient` awaits them, so the two
clients cannot drift apart. Operations that stream (backup, chat events) or
poll (waiting for a job) are written in each client.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from ragline.client import models as m
from ragline.client.transport import Call

B = TypeVar("B", bound=BaseModel)


def _model(cls: type[B], key: str | None = None) -> Callable[[httpx.Response], B]:
    def parse(r: httpx.Response) -> B:
        body = r.json()
        return cls.model_validate(body[key] if key else body)
    return parse


def _list(cls: type[B], key: str) -> Callable[[httpx.Response], list[B]]:
    def parse(r: httpx.Response) -> list[B]:
        return [cls.model_validate(x) for x in r.json()[key]]
    return parse


def _none(_: httpx.Response) -> None:
    return None


def _seg(value: str) -> str:
    """One path segment, escaped (a name may hold spaces or unicode)."""
    return quote(value, safe="")


# -- operations ---------------------------------------------------------------------------
def health() -> Call[m.Health]:
    return Call("GET", "/health", _model(m.Health), idempotent=True)


def info() -> Call[m.Info]:
    return Call("GET", "/info", _model(m.Info), idempotent=True)


def version() -> Call[m.Version]:
    return Call("GET", "/version", _model(m.Version), idempotent=True)


def providers() -> Call[dict[str, Any]]:
    return Call("GET", "/api/providers", lambda r: dict(r.json()), idempotent=True)


# -- collections --------------------------------------------------------------------------
def create_collection(name: str, metadata: Mapping[str, Any] | None = None, *,
                      embed_provider: str | None = None, embed_model: str | None = None,
                      embedding_provider: str | None = None,
                      embedding_model: str | None = None) -> Call[m.Collection]:
    """``embed_provider``: ragline embeds documents and text queries (opt-in, ``embed``);
    ``embedding_provider``/``embedding_model``: spec 000's labels, kept as metadata only."""
    body: dict[str, Any] = {"name": name, "metadata": dict(metadata) if metadata else None,
                            "embedding_provider": embedding_provider,
                            "embedding_model": embedding_model}
    if embed_provider:
        body["embed"] = {"provider": embed_provider, "model": embed_model}
    return Call("POST", "/collections", _model(m.Collection), json=body)


def list_collections() -> Call[list[m.Collection]]:
    return Call("GET", "/collections", _list(m.Collection, "collections"), idempotent=True)


def get_collection(name: str) -> Call[m.Collection]:
    return Call("GET", f"/collections/{_seg(name)}", _model(m.Collection), idempotent=True)


def update_collection_metadata(name: str, metadata: Mapping[str, Any], *,
                               merge: bool = False) -> Call[m.Collection]:
    return Call("PUT", f"/collections/{_seg(name)}/metadata", _model(m.Collection),
                params={"merge": str(merge).lower()}, json={"metadata": dict(metadata)},
                idempotent=True)


def delete_collection(name: str) -> Call[str]:
    return Call("DELETE", f"/collections/{_seg(name)}", lambda r: str(r.json()["collection"]),
                idempotent=True)


# -- documents ----------------------------------------------------------------------------
def add_documents(collection: str,
                  documents: Sequence[Mapping[str, Any]]) -> Call[m.DocumentsAdded]:
    """Documents as ``{"text", "metadata", "embedding", "id"}`` mappings; with ids the
    write is an upsert and may be retried, without them it is not."""
    docs = [dict(d) for d in documents]
    return Call("POST", f"/collections/{_seg(collection)}/documents",
                _model(m.DocumentsAdded), json={"documents": docs},
                idempotent=all(d.get("id") for d in docs))


def list_documents(collection: str, *, where: Mapping[str, Any] | None = None,
                   limit: int = 100, offset: int = 0) -> Call[m.DocumentPage]:
    import json

    return Call("GET", f"/collections/{_seg(collection)}/documents", _model(m.DocumentPage),
                params={"where": json.dumps(where) if where else None, "limit": limit,
                        "offset": offset}, idempotent=True)


def get_document(collection: str, doc_id: str) -> Call[m.Document]:
    return Call("GET", f"/collections/{_seg(collection)}/documents/{quote(doc_id, safe='/')}",
                _model(m.Document), idempotent=True)


def delete_documents(collection: str, ids: Sequence[str] | None = None,
                     where: Mapping[str, Any] | None = None) -> Call[m.DocumentsDeleted]:
    return Call("DELETE", f"/collections/{_seg(collection)}/documents",
                _model(m.DocumentsDeleted),
                json={"ids": list(ids) if ids is not None else None,
                      "where": dict(where) if where is not None else None}, idempotent=True)


def empty_collection(collection: str) -> Call[m.DocumentsDeleted]:
    return Call("DELETE", f"/collections/{_seg(collection)}/documents/all",
                _model(m.DocumentsDeleted), idempotent=True)


def metadata_values(collection: str, field: str) -> Call[m.MetadataValues]:
    return Call("GET", f"/collections/{_seg(collection)}/metadata-values",
                _model(m.MetadataValues), params={"field": field}, idempotent=True)


# -- sources ----------------------------------------------------------------------------
def list_sources(collection: str, *, limit: int = 100, offset: int = 0) -> Call[m.SourceList]:
    return Call("GET", f"/collections/{_seg(collection)}/sources", _model(m.SourceList),
                params={"limit": limit, "offset": offset}, idempotent=True)


def get_source(collection: str, source_id: str) -> Call[m.SourceDetail]:
    return Call("GET", f"/collections/{_seg(collection)}/sources/{quote(source_id, safe='/')}",
                _model(m.SourceDetail), idempotent=True)


def delete_source(collection: str, source_id: str) -> Call[m.SourceDeleted]:
    """A source's chunks and its ingestion state, together."""
    return Call("DELETE",
                f"/collections/{_seg(collection)}/sources/{quote(source_id, safe='/')}",
                _model(m.SourceDeleted), idempotent=True)


# -- search -------------------------------------------------------------------------------
def search(collection: str | None = None, query: str | None = None, *,
           embedding: Sequence[float] | None = None, limit: int = 10,
           where: Mapping[str, Any] | None = None, mode: str | None = None,
           **options: Any) -> Call[m.SearchResult]:
    """``POST /collections/{name}/search``; with no collection, ``POST /search`` (the
    default collection). ``options``: any other field of the search body (``rerank``,
    ``fusion``, ``expand``, ``score_threshold``, the book filters of ``/search``...)."""
    body: dict[str, Any] = {"query": query, "limit": limit, **options}
    if embedding is not None:
        body["embedding"] = list(embedding)
    if where is not None:
        body["where"] = dict(where)
    if mode is not None:
        body["mode"] = mode
    path = f"/collections/{_seg(collection)}/search" if collection else "/search"
    return Call("POST", path, _model(m.SearchResult), json=body, idempotent=True)


def context(chunk_id: str, *, collection: str | None = None,
            window: int | None = None) -> Call[m.ChunkContext]:
    return Call("GET", f"/context/{_seg(chunk_id)}", _model(m.ChunkContext),
                params={"collection": collection, "window": window}, idempotent=True)


def lesson(parent_doc_id: str, *, collection: str | None = None) -> Call[m.Lesson]:
    return Call("GET", f"/lesson/{quote(parent_doc_id, safe='/')}", _model(m.Lesson),
                params={"collection": collection}, idempotent=True)


def rerank(query: str, documents: Sequence[Mapping[str, Any]],
           top_k: int | None = None) -> Call[list[m.Reranked]]:
    """``POST /rerank``: documents need ``id`` and ``text``; raises ModelNotLoaded (503)
    when the server has no cross-encoder (the provider degrades, the client does not)."""
    body: dict[str, Any] = {"query": query, "documents": [dict(d) for d in documents]}
    if top_k is not None:
        body["top_k"] = top_k
    return Call("POST", "/rerank", _list(m.Reranked, "reranked"), json=body, idempotent=True)


# -- ingestion ----------------------------------------------------------------------------
def ingest_directory(path: str, collection: str | None = None, *, mode: str = "incremental",
                     paths: Sequence[str] | None = None) -> Call[m.JobStarted]:
    """A directory on the server's machine (admins; under the allowed roots) as a job."""
    return Call("POST", "/ingestion/trigger", _model(m.JobStarted),
                json={"collection": collection, "path": path, "mode": mode,
                      "paths": list(paths) if paths is not None else None})


def ingest_text(text: str, *, title: str | None = None,
                collection: str | None = None) -> Call[m.Ingested]:
    return Call("POST", "/api/rag/ingest/text", _model(m.Ingested),
                params={"collection": collection}, json={"text": text, "title": title})


def ingest_url(url: str, *, collection: str | None = None) -> Call[m.Ingested]:
    return Call("POST", "/api/rag/ingest/url", _model(m.Ingested),
                params={"collection": collection}, json={"url": url})


def ingest_upload(filename: str, data: bytes, *, collection: str | None = None,
                  path: str | None = None) -> Call[m.Ingested]:
    """``path``: the file's place in its tree (``a/x/README.md``), which gives the source
    the id a directory job would (see the upload route)."""
    return Call("POST", "/api/rag/ingest/upload", _model(m.Ingested),
                params={"collection": collection, "path": path},
                files={"documentFile": (filename, data)})


def job(job_id: str) -> Call[m.Job]:
    return Call("GET", f"/ingestion/status/{_seg(job_id)}", _model(m.Job), idempotent=True)


def jobs(*, limit: int = 20, collection: str | None = None) -> Call[list[m.Job]]:
    return Call("GET", "/ingestion/status", _list(m.Job, "jobs"),
                params={"limit": limit, "collection": collection}, idempotent=True)


def rerun_job(job_id: str) -> Call[m.JobStarted]:
    return Call("POST", f"/ingestion/jobs/{_seg(job_id)}/rerun", _model(m.JobStarted))


# -- answers ------------------------------------------------------------------------------
def chat(message: str, *, conversation_id: str | None = None,
         collection: str | None = None) -> Call[m.ChatAnswer]:
    return Call("POST", "/api/chat", _model(m.ChatAnswer),
                json={"message": message, "conversation_id": conversation_id,
                      "collection": collection, "stream": False})


def get_conversation(conversation_id: str) -> Call[m.Conversation]:
    return Call("GET", f"/api/conversations/{_seg(conversation_id)}", _model(m.Conversation),
                idempotent=True)


def delete_conversation(conversation_id: str) -> Call[None]:
    return Call("DELETE", f"/api/conversations/{_seg(conversation_id)}", _none,
                idempotent=True)


def checklist(title: str, *, collection: str | None = None, top_k: int | None = None,
              **alert: Any) -> Call[m.Checklist]:
    """``alert``: ``resource_type``, ``labels``, ``tags``, ``metrics``, ``logs``... (spec 003)."""
    body = {"title": title, "collection": collection, "top_k": top_k, **alert}
    return Call("POST", "/api/checklists", _model(m.Checklist),
                json={k: v for k, v in body.items() if v is not None})


# -- keys ---------------------------------------------------------------------------------
def create_key(role: str, tenant: str, name: str = "") -> Call[m.CreatedKey]:
    return Call("POST", "/api/keys", _model(m.CreatedKey),
                json={"role": role, "tenant": tenant, "name": name})


def list_keys() -> Call[list[m.ApiKey]]:
    return Call("GET", "/api/keys", _list(m.ApiKey, "keys"), idempotent=True)


def revoke_key(key_id: str) -> Call[m.ApiKey]:
    return Call("DELETE", f"/api/keys/{_seg(key_id)}", _model(m.ApiKey), idempotent=True)


BACKUP_PATH = "/admin/backup"
CHAT_PATH = "/api/chat"
