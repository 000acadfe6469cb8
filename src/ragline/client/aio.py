"""The asyncio client: ``AsyncClient(url, api_key=...)``, the same surface as ``Client``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TypeVar

import httpx

from ragline.client import endpoints as ep
from ragline.client.binding import SseReader, awaiting
from ragline.client.models import ChatEvent, Job
from ragline.client.sync import DEFAULT_URL
from ragline.client.transport import Call, RetryPolicy, auth_headers, check, parsed, unreachable
from ragline.errors import ServiceUnavailable

T = TypeVar("T")


class AsyncClient:
    """A ragline server over HTTP for asyncio code; see :class:`ragline.client.Client`."""

    def __init__(self, base_url: str = DEFAULT_URL, *, api_key: str | None = None,
                 tenant: str | None = None, timeout: float = 30.0,
                 retry: RetryPolicy | None = None,
                 transport: httpx.AsyncBaseTransport | None = None,
                 verify: bool = True) -> None:
        self.base_url = base_url.rstrip("/")
        self.retry = retry or RetryPolicy()
        self._http = httpx.AsyncClient(base_url=self.base_url, timeout=timeout,
                                       headers=auth_headers(api_key, tenant),
                                       transport=transport, verify=verify)

    async def _send(self, call: Call[Any], *, stream: bool = False) -> httpx.Response:
        attempt = 0
        while True:
            attempt += 1
            try:
                request = self._http.build_request(call.method, call.path,
                                                   **call.request_kwargs())
                response = await self._http.send(request, stream=stream)
            except httpx.TransportError as exc:
                wait = self.retry.delay(attempt, call, None, exc)
                if wait is None:
                    raise unreachable(self.base_url, exc) from exc
                await asyncio.sleep(wait)
                continue
            if response.status_code < 400:
                return response
            if stream:
                await response.aread()
            wait = self.retry.delay(attempt, call, response, None)
            if wait is None:
                return check(response)
            await asyncio.sleep(wait)

    async def _run(self, call: Call[T]) -> T:
        return parsed(call, await self._send(call))

    # -- operations and status --------------------------------------------------------
    health = awaiting(ep.health)
    info = awaiting(ep.info)
    version = awaiting(ep.version)
    providers = awaiting(ep.providers)
    # -- collections ------------------------------------------------------------------
    create_collection = awaiting(ep.create_collection)
    list_collections = awaiting(ep.list_collections)
    get_collection = awaiting(ep.get_collection)
    update_collection_metadata = awaiting(ep.update_collection_metadata)
    delete_collection = awaiting(ep.delete_collection)
    # -- documents --------------------------------------------------------------------
    add_documents = awaiting(ep.add_documents)
    list_documents = awaiting(ep.list_documents)
    get_document = awaiting(ep.get_document)
    delete_documents = awaiting(ep.delete_documents)
    empty_collection = awaiting(ep.empty_collection)
    metadata_values = awaiting(ep.metadata_values)
    # -- sources ----------------------------------------------------------------------
    list_sources = awaiting(ep.list_sources)
    get_source = awaiting(ep.get_source)
    delete_source = awaiting(ep.delete_source)
    # -- search and context -----------------------------------------------------------
    search = awaiting(ep.search)
    context = awaiting(ep.context)
    lesson = awaiting(ep.lesson)
    rerank = awaiting(ep.rerank)
    # -- ingestion --------------------------------------------------------------------
    ingest_directory = awaiting(ep.ingest_directory)
    ingest_text = awaiting(ep.ingest_text)
    ingest_url = awaiting(ep.ingest_url)
    ingest_upload = awaiting(ep.ingest_upload)
    job = awaiting(ep.job)
    jobs = awaiting(ep.jobs)
    rerun_job = awaiting(ep.rerun_job)
    # -- answers ----------------------------------------------------------------------
    chat = awaiting(ep.chat)
    get_conversation = awaiting(ep.get_conversation)
    delete_conversation = awaiting(ep.delete_conversation)
    checklist = awaiting(ep.checklist)
    # -- keys -------------------------------------------------------------------------
    create_key = awaiting(ep.create_key)
    list_keys = awaiting(ep.list_keys)
    revoke_key = awaiting(ep.revoke_key)

    async def wait_for_job(self, job_id: str, *, timeout: float | None = None,
                           interval: float = 0.5) -> Job:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            current = await self.job(job_id)
            if current.finished:
                return current
            if deadline is not None and time.monotonic() > deadline:
                raise ServiceUnavailable(f"Job '{job_id}' still {current.status} after "
                                         f"{timeout} s")
            await asyncio.sleep(interval)

    async def chat_stream(self, message: str, *, conversation_id: str | None = None,
                          collection: str | None = None) -> AsyncIterator[ChatEvent]:
        call = ep.chat(message, conversation_id=conversation_id, collection=collection)
        call.json = {**call.json, "stream": True}
        response = await self._send(call, stream=True)
        reader = SseReader()
        try:
            async for line in response.aiter_lines():
                event = reader.feed(line)
                if event is not None:
                    yield event
        finally:
            await response.aclose()

    async def download_backup(self, archive: Path, *,
                              include_secrets: bool = False) -> Path:
        call: Call[None] = Call("POST", ep.BACKUP_PATH, lambda r: None, json={},
                               params={"include_secrets": "true"} if include_secrets else None)
        response = await self._send(call, stream=True)
        try:
            with open(archive, "wb") as out:
                async for chunk in response.aiter_bytes():
                    out.write(chunk)
        finally:
            await response.aclose()
        return archive

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()
