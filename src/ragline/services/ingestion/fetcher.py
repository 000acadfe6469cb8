"""URL fetches on a bounded pool of their own, with a total deadline and a size cap.

A fetch waits on a remote server the user chose; run on the API's worker
threads, four URLs dripping a byte every 4 s held every thread and ``/health``
waited 37 s (issue 10). Here fetches run on ``url_fetch_workers`` threads of
their own, at most ``url_fetch_queue`` more wait, and beyond that a fetch is
refused at once with 429; the async entry point lets the API wait without
holding a thread.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future, ThreadPoolExecutor

from ragline.errors import InvalidInput, TooManyRequests
from ragline.ingest import ParserLimits, fetch_url
from ragline.ingest.types import SourceDocument
from ragline.settings import Settings


class UrlFetcher:
    def __init__(self, settings: Settings, limits: ParserLimits) -> None:
        self.settings = settings
        self.limits = limits
        self._pool = ThreadPoolExecutor(max_workers=settings.url_fetch_workers,
                                        thread_name_prefix="url-fetch")
        self._slots = threading.BoundedSemaphore(
            settings.url_fetch_workers + settings.url_fetch_queue)

    def _run(self, url: str) -> SourceDocument:
        s = self.settings
        try:
            return fetch_url(url, allow_private=s.allow_private_urls,
                             defaults=s.ingest_defaults, timeout=s.url_fetch_read_timeout_s,
                             total_timeout=s.url_fetch_total_timeout_s,
                             max_bytes=s.url_fetch_max_bytes, limits=self.limits)
        finally:
            self._slots.release()

    def submit(self, url: str) -> Future[SourceDocument]:
        if not self._slots.acquire(blocking=False):
            raise TooManyRequests(
                "Too many URL fetches in progress; retry shortly (settings url_fetch_workers, "
                "url_fetch_queue)", retry_after=max(1, int(self.settings.url_fetch_total_timeout_s
                                                           // 2)))
        try:
            return self._pool.submit(self._run, url)
        except BaseException:
            self._slots.release()
            raise

    def _deadline(self) -> float:
        # queued fetches wait for a thread first; a little slack past the fetch's own deadline
        return self.settings.url_fetch_total_timeout_s * 2 + 5

    def fetch(self, url: str) -> SourceDocument:
        """Blocking fetch (library, CLI, jobs)."""
        try:
            return self.submit(url).result(timeout=self._deadline())
        except TimeoutError:
            raise InvalidInput("fetching the URL took longer than the total deadline") from None

    async def fetch_async(self, url: str) -> SourceDocument:
        """Fetch without holding an API worker thread while the remote server answers."""
        try:
            return await asyncio.wait_for(asyncio.wrap_future(self.submit(url)),
                                          self._deadline())
        except TimeoutError:
            raise InvalidInput("fetching the URL took longer than the total deadline") from None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
