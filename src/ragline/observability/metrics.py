"""Every Prometheus metric ragline exports, defined in one place.

Callers record with one-line calls (``metrics.STORE_QUERY_SECONDS.labels(...)
.observe(dt)``); ``GET /metrics`` renders the default registry, which also holds
prometheus_client's process and Python collectors. Label values are bounded:
routes are templates (``/collections/{name}/search``, never the name), so a
scraper's series count does not grow with data.

Imports nothing from ragline, so any layer may record.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, Histogram, generate_latest

# Seconds: from sub-millisecond cache hits to multi-second reranks and uploads.
_LATENCY: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_BATCH: Final = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)

HTTP_REQUESTS: Final = Counter(
    "ragline_http_requests_total", "HTTP requests answered, by route template and status.",
    ["method", "route", "status"])
HTTP_LATENCY: Final = Histogram(
    "ragline_http_request_duration_seconds", "Time to answer an HTTP request.",
    ["method", "route"], buckets=_LATENCY)
HTTP_IN_PROGRESS: Final = Gauge(
    "ragline_http_requests_in_progress", "HTTP requests being answered now.")

BATCH_SIZE: Final = Histogram(
    "ragline_batch_size", "Items per coalesced batch (embed: query texts; search: store "
    "queries).", ["batcher"], buckets=_BATCH)
BATCH_QUEUE_WAIT: Final = Histogram(
    "ragline_batch_queue_wait_seconds", "How long an item waited for its batch to start.",
    ["batcher"], buckets=_LATENCY)
EMBED_TEXTS: Final = Counter(
    "ragline_embed_texts_total", "Texts sent to an embedding model (cache misses).",
    ["model"])
EMBED_CACHE: Final = Counter(
    "ragline_embedding_cache_total", "Embedding cache look-ups by result.", ["result"])

STORE_QUERY_SECONDS: Final = Histogram(
    "ragline_store_query_seconds", "Time of one vector-store query call (a batch counts once).",
    ["op"], buckets=_LATENCY)

JOBS: Final = Counter(
    "ragline_ingest_jobs_total", "Ingestion jobs finished, by kind and outcome.",
    ["kind", "status"])
JOBS_RUNNING: Final = Gauge("ragline_ingest_jobs_running", "Ingestion jobs running now.")
INGEST_FILES: Final = Counter(
    "ragline_ingest_files_total", "Files handled by ingestion jobs, by outcome.", ["outcome"])


def observe_batch(batcher: str, size: int, waits: list[float]) -> None:
    """``Coalescer.on_batch`` hook: batch size and each item's queue wait."""
    BATCH_SIZE.labels(batcher).observe(size)
    hist = BATCH_QUEUE_WAIT.labels(batcher)
    for w in waits:
        hist.observe(w)


def render() -> tuple[bytes, str]:
    """The exposition text of the default registry and its content type."""
    return generate_latest(), CONTENT_TYPE_LATEST
