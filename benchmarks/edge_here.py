"""A store's shard opened in the benchmark's own process, for timing raw Edge calls.

Every open generation is served by a host process (docs/storage.md), and Edge lets one
process at a time open a shard; so a benchmark that times ``EdgeShard`` calls itself
opens a *copy* (``store.snapshot``: flushed, taken while writes wait), as a host opens
a generation, while the store's host keeps serving the live one.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from ragline.providers.stores.qdrant_edge.generation import Generation
from ragline.providers.stores.qdrant_edge.generations import current
from ragline.providers.stores.qdrant_edge.host import open_generation
from ragline.providers.stores.qdrant_edge.provider import QdrantEdgeStore


def edge_here(store: QdrantEdgeStore, key: str) -> Generation:
    """The shard ``key`` as it is now, opened in this process (close it when done; the
    copy stays in a temporary directory)."""
    dest = Path(tempfile.mkdtemp(prefix="edge-here-"))
    store.snapshot(dest)
    return open_generation("open", current(dest / key), store.table.dimension(key),
                           store.config)

