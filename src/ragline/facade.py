"""The ``Ragline`` facade: built once from Settings, owns providers and services.

The HTTP app, the CLI and library users all go through this object, which is
why they behave the same.
"""

from __future__ import annotations

import logging
from typing import Any

from ragline.catalog.deliveries import Deliveries
from ragline.catalog.ingest_state import IngestState, JobTable
from ragline.catalog.sqlite import Catalog
from ragline.providers.registry import registry
from ragline.providers.stores.base import VectorStore
from ragline.providers.stores.qdrant_edge.provider import disk_usage
from ragline.services.collections import CollectionService
from ragline.services.diskspace import DiskGuard
from ragline.services.documents import DocumentService
from ragline.services.embedders import EmbedderPool
from ragline.services.ingest import IngestService
from ragline.services.jobs import JobService
from ragline.services.retrieval import BatchSettings, RetrievalService
from ragline.services.validation import InputLimits
from ragline.settings import Settings

log = logging.getLogger(__name__)


class Ragline:
    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        s = self.settings
        s.data_dir.mkdir(parents=True, exist_ok=True)
        self.catalog = Catalog(s.catalog_path())
        store_cls = registry.get("stores", s.store)
        self.store: VectorStore = store_cls(store_cls.Config(
            path=s.shards_dir(),
            exact_search_max_matches=s.exact_search_max_matches,
            hnsw_ef=s.hnsw_ef,
            search_threads=s.edge_search_threads,
            payload_memory=s.edge_payload_memory,
        ))
        self.embedders = EmbedderPool(s)
        self.collections = CollectionService(self.catalog, self.store, self.embedders)
        self.documents = DocumentService(
            self.collections, self.store, s.max_documents_per_request, self.embedders,
            limits=InputLimits.from_settings(s),
        )
        self.retrieval = RetrievalService(self.collections, self.store, self.embedders,
                                          s.rrf_k, s.hybrid_candidates,
                                          reranker=lambda: self.cross_encoder,
                                          fusion=s.hybrid_fusion,
                                          batch=BatchSettings(s.search_max_batch,
                                                              s.search_max_wait_ms,
                                                              s.search_workers))
        self.retrieval.limits = InputLimits.from_settings(s)
        self.cross_encoder: Any = None
        self.collections.recover()
        self.ingest_state = IngestState(self.catalog)
        self.deliveries = Deliveries(self.catalog)
        self.ingest_state.purge_stale({c.name: c.shard for c in self.collections.all()})
        self.ingest = IngestService(s, self.collections, self.store, self.embedders,
                                    self.ingest_state)
        # one free-space guard for every write path (issue 10)
        self.disk = DiskGuard(s.data_dir, s.disk_reserve_bytes)
        self.collections.disk = self.documents.disk = self.ingest.disk = self.disk
        self.jobs = JobService(JobTable(self.catalog), self.ingest, s.job_workers,
                               s.data_dir / "uploads")

    @property
    def tenant(self) -> str:
        return self.settings.default_tenant

    def storage_bytes(self) -> int:
        return disk_usage(self.settings.data_dir)

    def close(self) -> None:
        self.jobs.close()
        self.ingest.fetcher.close()
        self.retrieval.close()
        self.store.close()
        self.catalog.close()
