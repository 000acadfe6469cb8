"""The collections door (``rl.collections``) and the documents door (``rl.documents``:
records and the ingested sources they came from)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ragline.core.principal import Principal
from ragline.core.types import CollectionInfo, Page, Record, Scalar
from ragline.doors.base import Door
from ragline.errors import DocumentNotFound, InvalidInput
from ragline.services.corpus.collections import MSG_NOT_EXIST
from ragline.services.corpus.documents import DocumentInput
from ragline.services.corpus.slots import check_model_name
from ragline.services.ingestion.sources import SourceDetail, SourceInfo


@dataclass(frozen=True)
class CollectionView:
    """A collection as a caller sees it: catalog fields plus the caller's document count."""

    name: str
    metadata: dict[str, Any]
    dimension: int | None
    embedding_provider: str | None
    embedding_model: str | None
    count: int
    created_at: str
    updated_at: str
    embed: dict[str, str | None] | None = None  # server-side embedding, when opted in


def _str_or_none(v: Any) -> str | None:
    return v if isinstance(v, str) else None


class CollectionsDoor(Door):
    """Create, list, read, change, empty and delete collections."""

    def _view(self, info: CollectionInfo, caller: Principal) -> CollectionView:
        meta = info.metadata
        embed = ({"provider": info.embedding_provider, "model": info.embedding_model}
                 if info.embedding_provider else None)
        return CollectionView(info.name, meta, info.dimension,
                              _str_or_none(meta.get("embedding_provider")),
                              _str_or_none(meta.get("embedding_model")),
                              self._sv.collections.count(info, self._access.read_scope(caller)),
                              info.created_at, info.updated_at, embed)

    def create(self, caller: Principal, name: str, metadata: dict[str, Any] | None = None,
               embedding_provider: str | None = None, embedding_model: str | None = None,
               embed: dict[str, Any] | None = None) -> CollectionView:
        """``embedding_provider``/``embedding_model`` are spec 000's fields, kept as metadata
        only; ``embed`` (``{"provider", "model"}``) opts in to server-side embedding."""
        self._access.require_admin(caller, "create collections")
        if embed is not None and not caller.local:
            check_model_name(embed.get("model"))
        info = self._sv.collections.create(name, metadata, embedding_provider,
                                           embedding_model, embed)
        return self._view(info, caller)

    def all(self, caller: Principal) -> list[CollectionView]:
        """Every collection the caller may use."""
        return [self._view(c, caller) for c in self._sv.collections.all()
                if self._access.may_use(caller, c)]

    def get(self, caller: Principal, name: str) -> CollectionView:
        return self._view(self._access.collection(caller, name), caller)

    def update_metadata(self, caller: Principal, name: str, metadata: dict[str, Any],
                        merge: bool) -> CollectionView:
        self._access.require_admin(caller, "change a collection's metadata")
        return self._view(self._sv.collections.update_metadata(name, metadata, merge), caller)

    def delete(self, caller: Principal, name: str) -> str:
        self._access.require_admin(caller, "delete collections")
        deleted = self._sv.collections.delete(name).name
        self._sv.sources.forget_stale()
        return deleted

    def empty(self, caller: Principal, name: str) -> int:
        """Every document of the caller's tenant; an admin naming no tenant empties all."""
        self._access.collection(caller, name)
        if caller.all_tenants:
            n = self._sv.collections.empty(name, caller.tenant)
            self._sv.sources.forget_stale()  # the old shard's ingestion state
            return n
        return self._sv.sources.delete_all(name, self._access.write_tenant(caller))

    def optimize(self, caller: Principal, name: str) -> bool:
        """Build indexes now (offline use: see docs/storage.md)."""
        self._access.require_admin(caller, "optimize collections")
        return self._sv.collections.optimize(name)


class DocumentsDoor(Door):
    """Records of a collection, and the ingested sources (files, uploads, texts, URLs)
    they came from."""

    def add(self, caller: Principal, collection: str,
            documents: list[DocumentInput] | None) -> list[str]:
        """All or none: one validated write, in the caller's tenant."""
        self._access.collection(caller, collection)
        return self._sv.documents.add(collection, documents,
                                      self._access.write_tenant(caller))

    def page(self, caller: Principal, collection: str,
             where: dict[str, Any] | str | None = None, limit: int = 100,
             offset: int = 0) -> Page:
        self._access.collection(caller, collection)  # 404 before 400, as spec 000 lists
        node = self._sv.search.parse_where(where)
        limit = min(limit, self._settings.list_max_limit)
        return self._sv.documents.list_page(collection, self._access.read_scope(caller), node,
                                            limit, offset)

    def get(self, caller: Principal, collection: str, doc_id: str) -> Record:
        self._access.collection(caller, collection)
        rec = self._sv.documents.get(collection, self._access.read_scope(caller), doc_id)
        if rec is None:
            raise DocumentNotFound(f"Document '{doc_id}' not found in collection "
                                   f"'{collection}'")
        return rec

    def delete(self, caller: Principal, collection: str, ids: list[str] | None = None,
               where: dict[str, Any] | None = None) -> int:
        self._access.collection(caller, collection)
        node = self._sv.search.parse_where(where) if where is not None else None
        if ids is None and node is None:
            raise InvalidInput("Give 'ids' or a non-empty 'where' to choose the documents "
                               "to delete")
        if node is not None:
            self._sv.collections.require("metadata_filtering", "delete by metadata")
        # ingested sources whose chunks it removes stop being "unchanged" (issue 12)
        return self._sv.sources.delete_documents(collection,
                                                 self._access.write_tenant(caller), ids, node)

    def metadata_values(self, caller: Principal, collection: str,
                        field: str | None) -> list[Scalar]:
        self._access.collection(caller, collection, MSG_NOT_EXIST.format(collection))
        if field is None or field == "":  # after existence: a missing one is a 404
            raise InvalidInput("Query parameter 'field' is required")
        return self._sv.documents.distinct(collection, self._access.read_scope(caller), field)

    # -- sources ---------------------------------------------------------------------------
    def sources(self, caller: Principal, collection: str, limit: int = 100,
                offset: int = 0) -> tuple[list[SourceInfo], int]:
        """The caller's ingested sources (files, uploads, texts, URLs) and their total."""
        self._access.collection(caller, collection)
        if limit < 0 or offset < 0:
            raise InvalidInput("'limit' and 'offset' must be 0 or more")
        limit = min(limit, self._settings.list_max_limit)
        return self._sv.sources.page(collection, self._access.read_scope(caller), limit,
                                     offset, caller.local)

    def source(self, caller: Principal, collection: str, source_id: str) -> SourceDetail:
        self._access.collection(caller, collection)
        return self._sv.sources.get(collection, self._access.read_scope(caller), source_id,
                                    caller.local)

    def delete_source(self, caller: Principal, collection: str, source_id: str) -> int:
        """A source's chunks and its ingestion state, together; returns chunks deleted."""
        self._access.collection(caller, collection)
        return self._sv.sources.delete(collection, self._access.write_tenant(caller),
                                       source_id)
