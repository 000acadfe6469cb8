"""What ``/info`` and ``/health`` report, robust to collections emptied or deleted meanwhile.

Reading counts and sizes races with ``empty`` and ``delete`` (a shard can be
dropped between listing it and counting it, files can vanish while sizes are
summed). Those races once made ``/info`` answer 500 with internal paths in the
body (issue 10); here a collection that disappears is skipped or reported as
empty, and no exception text ever reaches the caller.
"""

from __future__ import annotations

import logging
from typing import Any

from ragline.errors import NotFound, RaglineError
from ragline.providers.stores.base import VectorStore
from ragline.services.collections import CollectionService

log = logging.getLogger(__name__)


def collection_stats(collections: CollectionService, store: VectorStore,
                     tenant: str) -> list[dict[str, Any]]:
    out = []
    for c in collections.all():
        try:
            n = store.count(c.shard, tenant, None) if c.dimension else 0
            size = store.size_bytes(c.shard)
        except (NotFound, RaglineError, OSError) as exc:  # emptied/deleted meanwhile
            try:
                c = collections.get(c.name)
            except NotFound:
                continue  # deleted: it is no longer a collection
            log.info("info: collection %s changed while read (%s)", c.name, type(exc).__name__)
            n, size = 0, 0
        out.append({"name": c.name, "count": n, "dimension": c.dimension, "size_bytes": size,
                    "embedding_provider": c.embedding_provider,
                    "embedding_model": c.embedding_model})
    return out
