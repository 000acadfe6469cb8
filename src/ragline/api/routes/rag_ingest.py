"""Per-user ingestion (upload, URL, text) into the caller's knowledge base.

Each source lands in the collection given as ``?collection=`` or the default
collection, under the caller's tenant. Small inputs are processed while the
request waits (201 with a summary); larger ones become a job (202 with its id,
pollable at ``/ingestion/status/{job_id}``): that policy lives in
``services/ingestion/ingestion.py``. The upload's size limit is checked here on the
declared length before the body is read (an HTTP concern), and again on the bytes.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from starlette.datastructures import UploadFile

from ragline.api.deps import RL, Caller
from ragline.api.schemas_out import IngestProcessed, IngestQueued, ok
from ragline.errors import InvalidInput, PayloadTooLarge
from ragline.facade import IngestOutcome, IngestSource, Principal, Ragline

router = APIRouter(prefix="/api/rag/ingest", tags=["per-user ingestion"])

FIELD = "documentFile"
MULTIPART_SLACK = 64 * 1024
COLLECTION = Query(None, description="Collection (default: the configured default collection).")


RESPONSES = {**ok(IngestProcessed, 201, "Processed while the request waited."),
             **ok(IngestQueued, 202, "Accepted as a job (a larger source).")}
UPLOAD_BODY: dict[str, Any] = {"requestBody": {"required": True, "content": {
    "multipart/form-data": {
        "schema": {"type": "object", "required": [FIELD], "properties": {FIELD: {
            "type": "string", "format": "binary",
            "description": "A Markdown, text, HTML or PDF file (limit max_upload_bytes)."}}},
        "example": {FIELD: "# Notes\n\nROS 2 topics carry messages between nodes."}}}}}
"""The upload is read from the request itself (the size limit is checked before the
body is parsed), so FastAPI cannot infer it; declared here for the OpenAPI document."""


class UrlBody(BaseModel):
    url: str

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"url": "https://docs.ros.org/en/rolling/Concepts.html"}]})


class TextBody(BaseModel):
    text: str | None = None
    title: str | None = None

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"text": "ROS 2 topics carry messages between nodes.", "title": "Topics"}]})


def _render(outcome: IngestOutcome) -> JSONResponse:
    if outcome.job is not None:
        job_id = outcome.job.id
        return JSONResponse({"message": "Document accepted for processing.", "jobId": job_id,
                             "job_id": job_id, "status": "queued"}, status_code=202)
    res = outcome.document
    assert res is not None
    message = ("Document unchanged; already processed." if res.unchanged
               else "Document processed successfully.")
    return JSONResponse({"message": message, "sourceId": res.source_id,
                         "chunksCreated": res.chunks, "title": res.title,
                         "unchanged": res.unchanged}, status_code=201)


UPLOAD_PATH = Query(None, max_length=4096, description=(
    "The file's path relative to its ingestion root (e.g. `a/x/README.md`): the source is "
    "then the one a directory job makes of that file (source id `a/x/README`, path "
    "metadata), so same-named files in different folders stay apart. Default: the "
    "source id is `upload/<file name>`."))


@router.post("/upload", status_code=201, responses=RESPONSES, openapi_extra=UPLOAD_BODY)
async def upload(request: Request, rl: RL, caller: Caller,
                 collection: str | None = COLLECTION,
                 path: str | None = UPLOAD_PATH) -> JSONResponse:
    """Ingest one uploaded file (``documentFile``, multipart) into the caller's tenant:
    processed at once (201) or, above ``ingest_sync_max_bytes``, as a job (202)."""
    with rl.ingestion.upload_slot():  # bounded concurrent uploads: 429 beyond (issue 10)
        return await _upload(request, rl, caller, collection, path)


async def _upload(request: Request, rl: Ragline, caller: Principal,
                  collection: str | None, path: str | None) -> JSONResponse:
    limit = rl.settings.max_upload_bytes
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit + MULTIPART_SLACK:
        raise PayloadTooLarge(f"File too large: {declared} bytes (limit {limit} bytes, "
                              "setting max_upload_bytes)")
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise InvalidInput(f"Send the file as multipart/form-data in the field '{FIELD}'")
    async with request.form(max_files=1, max_fields=10) as form:
        item = form.get(FIELD)
        if not isinstance(item, UploadFile):
            raise InvalidInput(f"'{FIELD}' is required (a file in multipart/form-data)")
        data = await item.read(limit + 1)
        filename = item.filename or ""
    src = IngestSource("upload", collection, data=data, filename=filename, relative_path=path)
    return _render(await run_in_threadpool(rl.ingestion.submit, caller, src))


@router.post("/url", status_code=201, responses=RESPONSES)
async def from_url(body: UrlBody, rl: RL, caller: Caller,
                   collection: str | None = COLLECTION) -> JSONResponse:
    """Fetch a public web page (SSRF-guarded, size- and time-limited) and ingest it
    into the caller's tenant."""
    src = IngestSource("url", collection, url=body.url)
    return _render(await rl.ingestion.submit_async(caller, src))  # the fetch holds no worker thread


@router.post("/text", status_code=201, responses=RESPONSES)
async def from_text(body: TextBody, rl: RL, caller: Caller,
                    collection: str | None = COLLECTION) -> JSONResponse:
    """Ingest a text (Markdown allowed) into the caller's tenant; the same text again is
    reported ``unchanged``."""
    src = IngestSource("text", collection, text=body.text, title=body.title)
    return _render(await run_in_threadpool(rl.ingestion.submit, caller, src))
