"""Export and import: move collections between setups (embedded → scaled out).

An export is JSON Lines, readable by any setup whatever its store and catalog:

* a header ``{"format": "ragline-export", "version": 1, ...}``;
* per collection ``{"type": "collection", "name", "metadata", "dimension", "embed"}``
  (``embed``: the server-side embedder it was created with, or null);
* its documents in batches ``{"type": "documents", "collection", "tenant", "records":
  [{"id", "text", "metadata", "embedding"}]}``, embeddings included, so an import
  writes the same vectors and never re-embeds.

Stores are read per tenant (isolation is the store's own filter), and no store lists
its tenants, so an export covers the tenants it can name: the default tenant, the
shared corpus (``*``) where it has records, every API key's tenant, and tenants listed
in collection metadata; more can be given. The counts per tenant are returned so an
operator can check them against the source.

Not exported: API keys (hashes; create keys again), conversations, ingestion state
(the first incremental run of a directory on the new setup sees every file as new)
and job history. An import refuses a collection that already exists there.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, TextIO

import numpy as np

from ragline.catalog.tables import KeyRows
from ragline.core.tenancy import SHARED
from ragline.core.types import CollectionInfo, Record
from ragline.errors import InvalidInput
from ragline.providers.stores.base import VectorStore
from ragline.services.corpus.collections import CollectionService

FORMAT = "ragline-export"
VERSION = 1
BATCH = 500


class TransferService:
    def __init__(self, collections: CollectionService, store: VectorStore, keys: KeyRows,
                 default_tenant: str) -> None:
        self.collections = collections
        self.store = store
        self.keys = keys
        self.default_tenant = default_tenant

    def tenants(self, extra: Iterable[str] = ()) -> list[str]:
        """Every tenant this setup can name (see the module docstring)."""
        names = {self.default_tenant, *extra, *(k.tenant for k in self.keys.list())}
        for info in self.collections.all():
            if info.dimension and self.store.count(info.shard, SHARED, None):
                names.add(SHARED)
            listed = info.metadata.get("tenants")
            if isinstance(listed, list):
                names.update(t for t in listed if isinstance(t, str))
        return sorted(names)

    # -- export ---------------------------------------------------------------------------
    def export(self, out: TextIO, extra_tenants: Iterable[str] = ()) -> dict[str, Any]:
        tenants = self.tenants(extra_tenants)
        counts: dict[str, dict[str, int]] = {}
        out.write(json.dumps({"format": FORMAT, "version": VERSION, "tenants": tenants}) + "\n")
        for info in self.collections.all():
            embed = ({"provider": info.embedding_provider, "model": info.embedding_model}
                     if info.embedding_provider else None)
            out.write(json.dumps({"type": "collection", "name": info.name,
                                  "metadata": info.metadata, "dimension": info.dimension,
                                  "embed": embed}) + "\n")
            counts[info.name] = {t: self._export_tenant(out, info, t) for t in tenants}
        return {"tenants": tenants, "documents": counts}

    def _export_tenant(self, out: TextIO, info: CollectionInfo, tenant: str) -> int:
        if not info.dimension or not self.store.has_shard(info.shard):
            return 0
        written, offset = 0, 0
        while True:
            page = self.store.list_page(info.shard, tenant, None, BATCH, offset)
            if not page.records:
                return written
            ids = [r.id for r in page.records]
            records = self.store.get(info.shard, tenant, ids, with_vectors=True)
            out.write(json.dumps({
                "type": "documents", "collection": info.name, "tenant": tenant,
                "records": [{"id": r.id, "text": r.text, "metadata": r.metadata,
                             "embedding": None if r.embedding is None
                             else [float(x) for x in r.embedding]} for r in records],
            }) + "\n")
            written += len(records)
            offset += len(page.records)

    # -- import ---------------------------------------------------------------------------
    def import_(self, lines: Iterable[str]) -> dict[str, Any]:
        counts: dict[str, dict[str, int]] = {}
        header = True
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except ValueError:
                raise InvalidInput(f"line {number} of the export is not JSON") from None
            if header:
                if item.get("format") != FORMAT or item.get("version") != VERSION:
                    raise InvalidInput(f"not a {FORMAT} version {VERSION} file")
                header = False
            elif item.get("type") == "collection":
                self._create(item)
                counts[item["name"]] = {}
            elif item.get("type") == "documents":
                n = self._write(item)
                per = counts.setdefault(item["collection"], {})
                per[item["tenant"]] = per.get(item["tenant"], 0) + n
            else:
                raise InvalidInput(f"line {number}: unknown item type {item.get('type')!r}")
        if header:
            raise InvalidInput("the export is empty")
        return {"documents": counts}

    def _create(self, item: dict[str, Any]) -> None:
        embed = item.get("embed")
        self.collections.create(item["name"], item.get("metadata") or {},
                                embed=embed if embed else None)
        if item.get("dimension"):
            info = self.collections.get(item["name"])
            if info.dimension is None:
                self.collections.set_dimension(info.name, int(item["dimension"]))
            elif info.dimension != item["dimension"]:
                raise InvalidInput(f"collection '{info.name}': the embedder here makes "
                                   f"{info.dimension}-d vectors, the export has "
                                   f"{item['dimension']}-d ones")

    def _write(self, item: dict[str, Any]) -> int:
        name, tenant = item["collection"], item["tenant"]
        records = [Record(r["id"], r["text"], r.get("metadata") or {},
                          np.asarray(r["embedding"], dtype=np.float32), tenant)
                   for r in item["records"] if r.get("embedding") is not None]
        if not records:
            return 0
        with self.collections.lock(name):
            info = self.collections.get(name)
            if info.dimension is None:
                raise InvalidInput(f"collection '{name}' has documents but no dimension")
            if not self.store.has_shard(info.shard):
                self.store.create_shard(info.shard, info.dimension)
            self.store.upsert(info.shard, records)
        return len(records)
