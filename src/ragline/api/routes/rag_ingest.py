"""hermitAI ingestion (spec 001 §2): upload, URL, text → the caller's knowledge base.

Each source lands in the default collection under the caller's tenant, with
the same chunk model as directory ingestion. Small inputs are processed while
the request waits (201 with the summary the spec shows); inputs above
``ingest_sync_max_bytes`` become a job (202 with its id, pollable at
``/ingestion/status/{job_id}``). The upload's size limit is checked on the
declared length before the body is read, and again on the bytes.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.datastructures import UploadFile

from ragline.api.deps import RL, Tenant
from ragline.api.routes.ingestion import default_collection
from ragline.errors import InvalidInput, PayloadTooLarge
from ragline.facade import Ragline
from ragline.ingest import PARSERS
from ragline.services.ingest_stats import DocumentResult

router = APIRouter(prefix="/api/rag/ingest", tags=["hermitAI ingestion"])

FIELD = "documentFile"
MULTIPART_SLACK = 64 * 1024


class UrlBody(BaseModel):
    url: str


class TextBody(BaseModel):
    text: str | None = None
    title: str | None = None


def _created(res: DocumentResult) -> JSONResponse:
    message = ("Document unchanged; already processed." if res.unchanged
               else "Document processed successfully.")
    return JSONResponse({"message": message, "sourceId": res.source_id,
                         "chunksCreated": res.chunks, "title": res.title,
                         "unchanged": res.unchanged}, status_code=201)


def _accepted(job_id: str) -> JSONResponse:
    return JSONResponse({"message": "Document accepted for processing.", "jobId": job_id,
                         "job_id": job_id, "status": "queued"}, status_code=202)


def _too_large(rl: Ragline, size: int) -> PayloadTooLarge:
    limit = rl.settings.max_upload_bytes
    return PayloadTooLarge(f"File too large: {size} bytes (limit {limit} bytes)")


@router.post("/upload", status_code=201)
async def upload(request: Request, rl: RL, tenant: Tenant) -> JSONResponse:
    with rl.ingest.upload_slot():  # bounded concurrent uploads: 429 beyond (issue 10)
        return await _upload(request, rl, tenant)


async def _upload(request: Request, rl: Ragline, tenant: str) -> JSONResponse:
    limit = rl.settings.max_upload_bytes
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit + MULTIPART_SLACK:
        raise _too_large(rl, int(declared))
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise InvalidInput(f"Send the file as multipart/form-data in the field '{FIELD}'")
    async with request.form(max_files=1, max_fields=10) as form:
        item = form.get(FIELD)
        if not isinstance(item, UploadFile):
            raise InvalidInput(f"'{FIELD}' is required (a file in multipart/form-data)")
        data = await item.read(limit + 1)
        filename = PurePosixPath((item.filename or "").replace("\\", "/")).name
    if len(data) > limit:
        raise _too_large(rl, len(data))
    suffix = PurePosixPath(filename).suffix.lower()
    if suffix not in PARSERS:
        raise InvalidInput(f"Unsupported file type {suffix or '(none)'!r}: upload one of "
                           f"{', '.join(sorted(PARSERS))}")
    if not data.strip():
        raise InvalidInput(f"{filename}: the file is empty")
    collection = default_collection(rl)
    if len(data) > rl.settings.ingest_sync_max_bytes:
        job = await run_in_threadpool(rl.jobs.submit_upload, collection, tenant, data, filename)
        return _accepted(job.id)
    res = await run_in_threadpool(rl.ingest.ingest_bytes, collection, tenant, data, filename)
    return _created(res)


@router.post("/url", status_code=201)
async def from_url(body: UrlBody, rl: RL, tenant: Tenant) -> JSONResponse:
    url = body.url.strip()
    if not url:
        raise InvalidInput("'url' must not be empty")
    doc = await rl.ingest.fetch_url_async(url)  # on the fetch pool, not an API thread
    res = await run_in_threadpool(rl.ingest.ingest_document, default_collection(rl), tenant,
                                  doc, "url")
    return _created(res)


@router.post("/text", status_code=201)
async def from_text(body: TextBody, rl: RL, tenant: Tenant) -> JSONResponse:
    text = body.text or ""
    if not text.strip():
        raise InvalidInput("'text' is required and must not be empty")
    collection = default_collection(rl)
    title = (body.title or "").strip() or None
    size = len(text.encode("utf-8"))
    if size > rl.settings.max_upload_bytes:
        raise PayloadTooLarge(f"Text too large: {size} bytes (limit "
                              f"{rl.settings.max_upload_bytes} bytes)")
    if size > rl.settings.ingest_sync_max_bytes:
        job = await run_in_threadpool(rl.jobs.submit_text, collection, tenant, text, title)
        return _accepted(job.id)
    res = await run_in_threadpool(rl.ingest.ingest_text, collection, tenant, text, title)
    return _created(res)
