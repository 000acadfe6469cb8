"""The store's options, and what Edge and a generation are given of them.

The server validates the options; a host process (:mod:`.host`) gets them as JSON,
already valid, and reads them without pydantic (its start-up is an interpreter's).
This module does not import Edge (the server never does).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from ragline.providers.base import ProviderConfig


class QdrantEdgeConfig(ProviderConfig):
    path: Path = Field(description="Directory holding one sub-directory per shard.")
    exact_search_max_matches: int = Field(
        25_000, ge=0, description="Filtered searches matching at most this many points are "
        "exact (brute force over the matches), the fastest correct plan for small sets.")
    hnsw_ef: int = Field(
        128, ge=1, description="HNSW search breadth (ef). 128: measured at 1M points (HNSW "
        "built, one query at a time), p95 2.1-2.9 ms with recall@10 0.995-1.000 for every "
        "filter shape and plan, against 3.6-5.5 ms (recall 0.999-1.000) at 256, the default "
        "before (BENCHMARKS.md).")
    hnsw_m: int = Field(16, ge=4, description="HNSW graph degree (m), used at index builds.")
    hnsw_ef_construct: int = Field(100, ge=4, description="HNSW build breadth.")
    hnsw_full_scan_threshold_kb: int = Field(
        10_000, ge=1, description="Edge searches a segment (or one filter value's points) by "
        "full scan below this many KB of vectors; also the size from which a payload value "
        "gets its own HNSW links.")
    indexing_threshold_kb: int = Field(
        10_000, ge=1, description="Segments with more KB of vectors than this get an HNSW "
        "index at a build (Edge's optimizer indexing threshold; 10 MB = ~6,500 384-d "
        "vectors); smaller ones are searched by full scan.")
    filter_links: bool = Field(
        True, description="Per-value HNSW links for keyword and integer metadata fields "
        "(Qdrant's filter-aware HNSW). Costs index build time; without them filtered HNSW "
        "loses recall and mid-selectivity filters fall back to ACORN.")
    build_nice: int = Field(10, ge=0, le=19, description="Niceness of the background index "
                            "build process, so serving keeps the cores it needs.")
    search_threads: int = Field(
        1, ge=1, le=64, description="Threads of each shard's search pool. 1 by default: under "
        "concurrent requests the requests already fill the cores, and measured on 2 cores "
        "(hybrid search over HTTP, 100 connections) 1 thread gave 1.2x the QPS of Edge's "
        "CPU-derived default (8) and of 2.")
    index_memory: Literal["cold", "pinned"] = Field(
        "cold", description="Where payload indexes (ids, BM25 text, metadata; the tenant "
        "index is always in memory) live: "
        "'cold' keeps Edge's on-disk structures, memory-mapped, so opening a shard (and the "
        "swap after a background index build, which holds the GIL) only maps files; "
        "'pinned' rebuilds them as in-memory maps at every open: measured 1.7-2x slower to "
        "open at 50k points, 1.1-1.5x faster filtered searches. Existing indexes are converted "
        "at the next background build.")
    payload_memory: Literal["cold", "cached"] = Field(
        "cached", description="Where Edge keeps payloads (chunk text and metadata): 'cached' "
        "keeps them in memory once read (every search returns them), 'cold' reads them from "
        "disk each time (less RAM for very large collections).")
    warm_open: bool = Field(
        True, description="Open generations warm: read the vectors, HNSW links and payload "
        "indexes of their built segments in order before Edge loads them, and keep the "
        "payload indexes mapped while they are open (at most half and a quarter of the "
        "memory available then). Measured at 1M points: the first searches after a "
        "background build's swap waited 206-761 ms without, and later ones ran 4-7x slower "
        "when the files had come into memory through Edge's own page faults.")

    @model_validator(mode="before")
    @classmethod
    def _removed_options(cls, data: Any) -> Any:
        """``shard_processes`` (removed by issue 34): every generation is served by a host
        process now; ``true`` is accepted and changes nothing, ``false`` is refused."""
        if isinstance(data, dict) and "shard_processes" in data:
            data = dict(data)
            if not data.pop("shard_processes"):
                raise ValueError(
                    "the store option shard_processes is gone: every shard generation is "
                    "served by a host process now (the in-process mode was removed); "
                    "remove shard_processes from RAGLINE_STORE_OPTIONS")
        return data
