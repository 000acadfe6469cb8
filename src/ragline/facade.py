"""The ``Ragline`` facade: built once from Settings, owns providers and services.

The HTTP app, the CLI and library users all go through this object, which is
why they behave the same.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from pydantic import ValidationError

from ragline.catalog.ingest_state import IngestState, JobTable
from ragline.catalog.sqlite import Catalog
from ragline.errors import InvalidInput
from ragline.providers.registry import registry
from ragline.providers.stores.base import VectorStore
from ragline.providers.stores.qdrant_edge.provider import disk_usage
from ragline.services.collections import CollectionService
from ragline.services.documents import DocumentService
from ragline.services.embedders import EmbedderPool
from ragline.services.ingest import IngestService
from ragline.services.jobs import JobService
from ragline.services.retrieval import BatchSettings, RetrievalService
from ragline.settings import Settings

log = logging.getLogger(__name__)


class Ragline:
    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        s = self.settings
        s.data_dir.mkdir(parents=True, exist_ok=True)
        self.catalog = Catalog(s.catalog_path())
        self.store: VectorStore = self._make_store(s)
        self.embedders = EmbedderPool(s)
        self.collections = CollectionService(self.catalog, self.store, self.embedders)
        self.documents = DocumentService(
            self.collections, self.store, s.max_documents_per_request, self.embedders
        )
        self.retrieval = RetrievalService(self.collections, self.store, self.embedders,
                                          s.rrf_k, s.hybrid_candidates,
                                          reranker=lambda: self.cross_encoder,
                                          fusion=s.hybrid_fusion,
                                          batch=BatchSettings(s.search_max_batch,
                                                              s.search_max_wait_ms,
                                                              s.search_workers))
        self.cross_encoder: Any = None
        self.collections.recover()
        self.ingest_state = IngestState(self.catalog)
        self.ingest_state.purge_stale({c.name: c.shard for c in self.collections.all()})
        self.ingest = IngestService(s, self.collections, self.store, self.embedders,
                                    self.ingest_state)
        self.jobs = JobService(JobTable(self.catalog), self.ingest, s.job_workers,
                               s.data_dir / "uploads")

    @staticmethod
    def _make_store(s: Settings) -> VectorStore:
        """The configured store: a server store from ``store_config`` (JSON, validated by
        the provider's own Config), else the embedded store from the data directory."""
        store_cls = registry.get("stores", s.store)
        raw = s.store_config.get_secret_value().strip()
        if raw:
            try:
                options = json.loads(raw)
                config = store_cls.Config.model_validate(options)
            except (ValueError, ValidationError) as exc:
                # the message names the bad fields, never the values (DSNs, keys)
                fields = _error_fields(exc)
                raise InvalidInput(f"Invalid store_config for store '{s.store}'"
                                   + (f": check {fields}" if fields else "")) from None
            return store_cls(config)
        return store_cls(store_cls.Config(
            path=s.shards_dir(),
            exact_search_max_matches=s.exact_search_max_matches,
            hnsw_ef=s.hnsw_ef,
            search_threads=s.edge_search_threads,
            payload_memory=s.edge_payload_memory,
        ))

    @property
    def tenant(self) -> str:
        return self.settings.default_tenant

    def storage_bytes(self) -> int:
        return disk_usage(self.settings.data_dir)

    def close(self) -> None:
        self.jobs.close()
        self.retrieval.close()
        self.store.close()
        self.catalog.close()


def _error_fields(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return ", ".join(sorted({".".join(str(p) for p in e["loc"]) or "(object)"
                                 for e in exc.errors()}))
    return ""
