"""Collection lifecycle: create, list, read, update metadata, delete, empty.

Emptying swaps the collection onto a fresh shard and then drops the old one,
so it is atomic (the catalog pointer moves in one transaction) and costs the
same for 50 documents or 50,000.
"""

from __future__ import annotations

import logging
import threading
import uuid
from typing import TYPE_CHECKING, Any

from ragline.catalog.tables import CollectionCatalog
from ragline.core.tenancy import TenantScope
from ragline.core.types import CollectionInfo
from ragline.errors import InvalidInput
from ragline.providers.stores.base import VectorStore
from ragline.services.corpus.diskspace import DiskGuard
from ragline.services.corpus.validation import check_collection_name

if TYPE_CHECKING:
    from ragline.services.corpus.embedders import EmbedderPool

log = logging.getLogger(__name__)

MSG_NOT_EXIST = "Collection '{}' does not exist."


def static_dimension(embedder: Any) -> int | None:
    """The embedder's dimension if it is known without calling out to a service.

    Creating a collection must not depend on a remote embedding API being up
    (spec 000 stores provider settings without validating them); a hosted
    provider with no configured dimension learns it from its first call.
    """
    remote_unknown = getattr(embedder, "_dimension", 0) is None
    return None if remote_unknown else int(embedder.dimension)


def new_shard_key() -> str:
    return uuid.uuid4().hex


def check_access_metadata(metadata: dict[str, Any]) -> None:
    """Collection metadata whose wrong type would widen access is refused (issue 32):
    ``tenants`` (who may read the collection) must be a list of strings or null; a string
    (``"alice"``) used to leave the collection readable by every tenant."""
    tenants = metadata.get("tenants")
    if tenants is None:  # shared
        return
    if not isinstance(tenants, list) or not all(isinstance(t, str) and t for t in tenants):
        raise InvalidInput("Invalid metadata: 'tenants' must be a list of tenant names "
                           f"(strings), got {type(tenants).__name__}"
                           + (" holding a non-string or empty name"
                              if isinstance(tenants, list) else ""))


class CollectionService:
    def __init__(self, catalog: CollectionCatalog, store: VectorStore,
                 embedders: EmbedderPool | None = None, disk: DiskGuard | None = None) -> None:
        self.disk = disk or DiskGuard.unlimited()
        self.catalog = catalog
        self.store = store
        self.embedders = embedders
        self._locks: dict[str, threading.RLock] = {}
        self._locks_guard = threading.Lock()

    def lock(self, name: str) -> threading.RLock:
        """Serialises writes that change a collection's shape (first write, empty, delete)."""
        with self._locks_guard:
            return self._locks.setdefault(name, threading.RLock())

    def create(
        self, name: str, metadata: dict[str, Any] | None = None,
        embedding_provider: str | None = None, embedding_model: str | None = None,
        embed: dict[str, Any] | None = None, dimension: int | None = None,
    ) -> CollectionInfo:
        """Spec 000's ``embedding_provider``/``embedding_model`` are stored as metadata,
        without validation, and change nothing else: such a collection takes pre-computed
        embeddings. Server-side embedding is opted in with ``embed`` (``{"provider",
        "model"}``), whose provider must be one ragline can run."""
        check_collection_name(name)
        self.disk.check("create a collection")
        if metadata is not None and not isinstance(metadata, dict):
            raise InvalidInput("Invalid metadata: must be an object")
        meta = dict(metadata or {})
        check_access_metadata(meta)
        if embedding_provider is not None:
            meta["embedding_provider"] = embedding_provider
        if embedding_model is not None:
            meta["embedding_model"] = embedding_model
        provider: str | None = None
        model: str | None = None
        if embed is not None:
            if not isinstance(embed, dict) or not isinstance(embed.get("provider"), str):
                raise InvalidInput("'embed' must be an object with a 'provider' name")
            provider, model = embed["provider"], embed.get("model")
            known = self.embedders.names() if self.embedders is not None else []
            if self.embedders is None or not self.embedders.known(provider):
                raise InvalidInput(f"Unknown embedding provider '{provider}' in 'embed' "
                                   f"(available: {', '.join(known) or 'none'})")
        if provider and self.embedders is not None:
            # a provider ragline can run fixes the dimension now, so pre-computed
            # vectors of another size are refused from the first request on
            emb = self.embedders.get(provider, model)
            dimension = static_dimension(emb.inner)
            model = model or emb.model
        return self.catalog.create_collection(
            name, meta, new_shard_key(), dimension, provider, model)

    def require(self, capability: str, what: str) -> None:
        """A 400 when the store lacks ``capability`` (``capabilities()``): a plugin store,
        or a second store that ``?service=`` routes to, says what it cannot do."""
        if capability not in self.store.capabilities():
            raise InvalidInput(f"The '{self.store.name}' store cannot {what} (no capability "
                               f"'{capability}')")

    def get(self, name: str, *, message: str | None = None) -> CollectionInfo:
        return self.catalog.get_collection(name, message=message)

    def find(self, name: str) -> CollectionInfo | None:
        return self.catalog.find_collection(name)

    def set_dimension(self, name: str, dimension: int) -> None:
        self.catalog.set_dimension(name, dimension)

    def count(self, info: CollectionInfo, tenant: TenantScope) -> int:
        """Documents of ``tenant`` in the collection (0 before its first write); a
        reader's scope counts its own and the shared ones."""
        return self.store.count(info.shard, tenant, None) if info.dimension else 0

    def size_bytes(self, info: CollectionInfo) -> int:
        return self.store.size_bytes(info.shard) if info.dimension else 0

    def all(self) -> list[CollectionInfo]:
        return self.catalog.list_collections()

    def update_metadata(self, name: str, metadata: dict[str, Any], merge: bool) -> CollectionInfo:
        if not isinstance(metadata, dict):
            raise InvalidInput("Invalid metadata: must be an object")
        with self.lock(name):
            info = self.catalog.get_collection(name)
            new = {**info.metadata, **metadata} if merge else dict(metadata)
            check_access_metadata(new)
            return self.catalog.set_metadata(name, new)

    def delete(self, name: str) -> CollectionInfo:
        with self.lock(name):
            info = self.catalog.delete_collection(name)
            self._drop_retired(info.shard)
            return info

    def empty(self, name: str, tenant: str) -> int:
        """Delete every document, keep the collection and its metadata; all or nothing."""
        with self.lock(name):
            info = self.catalog.get_collection(name)
            if info.dimension is None or not self.store.has_shard(info.shard):
                return 0
            self.disk.check("empty the collection (it starts a new shard)")
            count = self.store.count(info.shard, tenant, None)
            new = new_shard_key()
            self.store.create_shard(new, info.dimension)
            try:
                self.catalog.swap_shard(name, info.shard, new)
            except BaseException:
                self.store.drop_shard(new)
                raise
            # the swap made the empty visible and atomic; closing and deleting the old
            # shard is ~75 % of the time, so it runs in the background (start-up
            # recovery finishes it if the process dies first)
            threading.Thread(target=self._drop_retired, args=(info.shard,),
                             name=f"drop-{info.shard}", daemon=True).start()
            return count

    def optimize(self, name: str) -> bool:
        """Build the collection's indexes now; False when already optimal (or empty)."""
        info = self.get(name)
        return bool(info.dimension) and self.store.optimize(info.shard)

    def replace_shard(self, name: str, old: str, new: str) -> None:
        """Point ``name`` at an already filled shard ``new`` (a rebuild), then drop ``old``.

        The swap is one catalog transaction, so readers see the old contents or
        the new ones, never a half-built collection.
        """
        with self.lock(name):
            self.catalog.swap_shard(name, old, new)
            self._drop_retired(old)

    def _drop_retired(self, shard: str) -> None:
        try:
            self.store.drop_shard(shard)
            self.catalog.forget_retired(shard)
        except Exception as exc:  # retried at the next start-up
            log.warning("could not drop retired shard %s yet: %s", shard, exc)

    def recover(self, orphans: bool = True) -> None:
        """Finish what a crash interrupted.

        Retired shards (an empty or delete that did not get to drop them) are
        dropped; with ``orphans``, shards no collection points at (a create or empty
        interrupted before its catalog write) are removed — only safe for the one
        process that owns the catalog.
        """
        for shard in self.catalog.retired_shards():
            self._drop_retired(shard)
        if not orphans:
            return
        live = self.catalog.live_shards()
        for shard in self.store.shard_keys():
            if shard not in live:
                log.info("removing orphan shard %s", shard)
                self.store.drop_shard(shard)
