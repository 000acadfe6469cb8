"""The ingestion use case: one submission path for HTTP, the webhook, the CLI and MCP.

Every source (a directory on the server, an upload, a text, a URL) enters through
:meth:`IngestionService.submit`, which validates it completely before anything
is written and applies one policy: directories always become jobs; uploads and
texts are processed while the caller waits unless they are larger than
``ingest_sync_max_bytes`` (then a job, answered 202); URLs are fetched while the
caller waits. The CLI asks for ``wait=True`` and runs the same job in its own
process with a progress bar.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import Literal

from ragline.catalog.ingest_state import Job
from ragline.errors import InvalidInput, PayloadTooLarge
from ragline.ingest import PARSERS
from ragline.ingest.types import SourceDocument
from ragline.services.ingestion.ingest import IngestService, upload_relative_path
from ragline.services.ingestion.ingest_stats import DocumentResult, Progress
from ragline.services.ingestion.jobs import JobService, JobSpec
from ragline.services.search.searching import SearchService
from ragline.settings import Settings

SourceKind = Literal["directory", "upload", "text", "url"]


@dataclass
class IngestSource:
    """One thing to ingest. Which fields matter depends on ``kind``."""

    kind: SourceKind
    collection: str | None = None
    path: str | None = None  # directory
    mode: str = "incremental"  # directory
    paths: list[str] | None = None  # directory: only these (relative) paths
    data: bytes | None = None  # upload
    filename: str | None = None  # upload
    relative_path: str | None = None  # upload: its place in a tree (the source id follows)
    text: str | None = None  # text
    title: str | None = None  # text
    url: str | None = None  # url
    fetched: SourceDocument | None = None  # url, already fetched (see prefetch)
    trigger: str = "api"


@dataclass
class IngestOutcome:
    """Either the processed document (done while the caller waited) or the queued job."""

    document: DocumentResult | None = None
    job: Job | None = None


class IngestionService:
    def __init__(self, settings: Settings, ingest: IngestService, jobs: JobService,
                 search: SearchService) -> None:
        self.settings = settings
        self.ingest = ingest
        self.jobs = jobs
        self.search = search

    def submit(self, tenant: str, src: IngestSource, *, wait: bool = False,
               progress: Progress | None = None, local: bool = False) -> IngestOutcome:
        collection = self.search.collection_name(src.collection)
        if src.kind == "directory":
            if src.path is None or not src.path.strip():
                raise InvalidInput("'path' is required: the directory to ingest")
            spec = JobSpec("directory", collection, tenant, src.mode, src.path, src.paths,
                           trigger=src.trigger)
            return IngestOutcome(job=self.jobs.submit(spec, inline=wait, progress=progress,
                                                      local=local))
        if src.kind == "upload":
            data, filename, rel = self._check_upload(src)
            if len(data) > self.settings.ingest_sync_max_bytes and not wait:
                spec = JobSpec("upload", collection, tenant, path=filename,
                               restrict=[rel] if rel is not None else None, payload=data,
                               trigger=src.trigger)
                return IngestOutcome(job=self.jobs.submit(spec))
            return IngestOutcome(self.ingest.ingest_bytes(collection, tenant, data, filename,
                                                          rel))
        if src.kind == "text":
            text = src.text or ""
            if not text.strip():
                raise InvalidInput("'text' is required and must not be empty")
            title = (src.title or "").strip() or None
            raw = text.encode("utf-8")
            if len(raw) > self.settings.max_upload_bytes:
                raise PayloadTooLarge(f"Text too large: {len(raw)} bytes (limit "
                                      f"{self.settings.max_upload_bytes} bytes, setting "
                                      "max_upload_bytes)")
            if len(raw) > self.settings.ingest_sync_max_bytes and not wait:
                spec = JobSpec("text", collection, tenant, path=title, payload=raw,
                               trigger=src.trigger)
                return IngestOutcome(job=self.jobs.submit(spec))
            return IngestOutcome(self.ingest.ingest_text(collection, tenant, text, title))
        if src.kind == "url":
            if src.fetched is not None:
                return IngestOutcome(self.ingest.ingest_document(collection, tenant,
                                                                 src.fetched, "url"))
            url = (src.url or "").strip()
            if not url:
                raise InvalidInput("'url' must not be empty")
            return IngestOutcome(self.ingest.ingest_url(collection, tenant, url))
        raise InvalidInput(f"Unknown source kind '{src.kind}'")

    async def prefetch(self, src: IngestSource) -> IngestSource:
        """A URL source with its page fetched on the fetch pool, awaited without holding
        a worker thread (slow remote servers once starved the API; issue 10)."""
        if src.kind != "url" or src.fetched is not None:
            return src
        url = (src.url or "").strip()
        if not url:
            raise InvalidInput("'url' must not be empty")
        return replace(src, fetched=await self.ingest.fetch_url_async(url))

    def _check_upload(self, src: IngestSource) -> tuple[bytes, str, str | None]:
        data = src.data or b""
        filename = PurePosixPath((src.filename or "").replace("\\", "/")).name
        rel = None
        if src.relative_path is not None:
            rel = upload_relative_path(src.relative_path)
            filename = filename or PurePosixPath(rel).name
            if PurePosixPath(rel).suffix.lower() != PurePosixPath(filename).suffix.lower():
                raise InvalidInput(f"'path' ({rel}) and the file's name ({filename}) must "
                                   "have the same extension")
        limit = self.settings.max_upload_bytes
        if len(data) > limit:
            raise PayloadTooLarge(f"File too large: {len(data)} bytes (limit {limit} bytes, "
                                  "setting max_upload_bytes)")
        suffix = PurePosixPath(filename).suffix.lower()
        if suffix not in PARSERS:
            raise InvalidInput(f"Unsupported file type {suffix or '(none)'!r}: upload one of "
                               f"{', '.join(sorted(PARSERS))}")
        if not data.strip():
            raise InvalidInput(f"{filename}: the file is empty")
        return data, filename, rel

    # -- jobs ---------------------------------------------------------------------------
    def job(self, tenant: str | None, job_id: str) -> Job:
        return self.jobs.get(job_id, tenant)

    def recent(self, tenant: str | None, limit: int, collection: str | None) -> list[Job]:
        return self.jobs.recent(limit, collection, tenant)

    def rerun(self, tenant: str | None, job_id: str) -> Job:
        return self.jobs.rerun(job_id, tenant)
