"""The blocking client: ``Client(url, api_key=...)`` and every operation of the HTTP API."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx

from ragline.client import endpoints as ep
from ragline.client.binding import SseReader, blocking
from ragline.client.models import ChatEvent, Job
from ragline.client.transport import (
    TENANT_HEADER,
    Call,
    RetryPolicy,
    auth_headers,
    check,
    parsed,
    unreachable,
)
from ragline.errors import ServiceUnavailable

T = TypeVar("T")
DEFAULT_URL = "http://127.0.0.1:8000"


class Client:
    """A ragline server over HTTP, blocking.

    ``api_key`` is sent as ``Authorization: Bearer``; ``tenant`` (admins) as
    ``X-Ragline-Tenant``. Errors are the ``ragline.errors`` classes the server
    raised; transient failures are retried as ``retry`` says (see
    ``ragline.client.transport``); ``verify=False`` skips checking the server's TLS
    certificate. Use it as a context manager, or call :meth:`close`.
    """

    def __init__(self, base_url: str = DEFAULT_URL, *, api_key: str | None = None,
                 tenant: str | None = None, timeout: float = 30.0,
                 retry: RetryPolicy | None = None,
                 transport: httpx.BaseTransport | None = None, verify: bool = True) -> None:
        self.base_url = base_url.rstrip("/")
        self.retry = retry or RetryPolicy()
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout,
                                  headers=auth_headers(api_key, tenant), transport=transport,
                                  verify=verify)
        self._tenant: dict[str, str] = {}

    def for_tenant(self, tenant: str) -> Client:
        """This client acting in ``tenant`` (admin keys), sharing its connections; close
        the original, not this view."""
        view = copy.copy(self)
        view._tenant = {TENANT_HEADER: tenant}
        return view

    def _send(self, call: Call[Any], *, stream: bool = False) -> httpx.Response:
        """One call with the retry policy; an error answer raises its RaglineError."""
        attempt = 0
        while True:
            attempt += 1
            try:
                request = self._http.build_request(call.method, call.path,
                                                   **call.request_kwargs())
                request.headers.update(self._tenant)
                response = self._http.send(request, stream=stream)
            except httpx.TransportError as exc:
                wait = self.retry.delay(attempt, call, None, exc)
                if wait is None:
                    raise unreachable(self.base_url, exc) from exc
                time.sleep(wait)
                continue
            if response.status_code < 400:
                return response
            if stream:
                response.read()
            wait = self.retry.delay(attempt, call, response, None)
            if wait is None:
                return check(response)
            time.sleep(wait)

    def _run(self, call: Call[T]) -> T:
        return parsed(call, self._send(call))

    # -- operations and status --------------------------------------------------------
    health = blocking(ep.health)
    info = blocking(ep.info)
    version = blocking(ep.version)
    providers = blocking(ep.providers)
    # -- collections ------------------------------------------------------------------
    create_collection = blocking(ep.create_collection)
    list_collections = blocking(ep.list_collections)
    get_collection = blocking(ep.get_collection)
    update_collection_metadata = blocking(ep.update_collection_metadata)
    delete_collection = blocking(ep.delete_collection)
    # -- documents --------------------------------------------------------------------
    add_documents = blocking(ep.add_documents)
    list_documents = blocking(ep.list_documents)
    get_document = blocking(ep.get_document)
    delete_documents = blocking(ep.delete_documents)
    empty_collection = blocking(ep.empty_collection)
    metadata_values = blocking(ep.metadata_values)
    # -- sources ----------------------------------------------------------------------
    list_sources = blocking(ep.list_sources)
    get_source = blocking(ep.get_source)
    delete_source = blocking(ep.delete_source)
    # -- search and context -----------------------------------------------------------
    search = blocking(ep.search)
    context = blocking(ep.context)
    lesson = blocking(ep.lesson)
    rerank = blocking(ep.rerank)
    # -- ingestion --------------------------------------------------------------------
    ingest_directory = blocking(ep.ingest_directory)
    ingest_text = blocking(ep.ingest_text)
    ingest_url = blocking(ep.ingest_url)
    ingest_upload = blocking(ep.ingest_upload)
    job = blocking(ep.job)
    jobs = blocking(ep.jobs)
    rerun_job = blocking(ep.rerun_job)
    # -- answers ----------------------------------------------------------------------
    chat = blocking(ep.chat)
    get_conversation = blocking(ep.get_conversation)
    delete_conversation = blocking(ep.delete_conversation)
    checklist = blocking(ep.checklist)
    # -- keys -------------------------------------------------------------------------
    create_key = blocking(ep.create_key)
    list_keys = blocking(ep.list_keys)
    revoke_key = blocking(ep.revoke_key)

    def wait_for_job(self, job_id: str, *, timeout: float | None = None,
                     interval: float = 0.5) -> Job:
        """Poll until the job has succeeded or failed; ServiceUnavailable after ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            current = self.job(job_id)
            if current.finished:
                return current
            if deadline is not None and time.monotonic() > deadline:
                raise ServiceUnavailable(f"Job '{job_id}' still {current.status} after "
                                         f"{timeout} s")
            time.sleep(interval)

    def chat_stream(self, message: str, *, conversation_id: str | None = None,
                    collection: str | None = None) -> Iterator[ChatEvent]:
        """``POST /api/chat`` streamed: ``token`` events, then ``done`` (or ``error``)."""
        call = ep.chat(message, conversation_id=conversation_id, collection=collection)
        call.json = {**call.json, "stream": True}
        response = self._send(call, stream=True)
        reader = SseReader()
        try:
            for line in response.iter_lines():
                event = reader.feed(line)
                if event is not None:
                    yield event
        finally:
            response.close()

    def download_backup(self, archive: Path, *,
                        include_secrets: bool = False) -> Path:
        """``POST /admin/backup`` (admins): a consistent snapshot as a .tar.gz at ``archive``
        (unpack it with ``ragline.facade.unpack_backup`` or ``ragline backup``)."""
        call: Call[None] = Call("POST", ep.BACKUP_PATH, lambda r: None, json={},
                               params={"include_secrets": "true"} if include_secrets else None)
        response = self._send(call, stream=True)
        try:
            with open(archive, "wb") as out:
                for chunk in response.iter_bytes():
                    out.write(chunk)
        finally:
            response.close()
        return archive

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
