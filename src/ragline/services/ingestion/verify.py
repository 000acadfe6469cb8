"""``ragline verify``: does the ingestion state in the catalog agree with the store?

Ingestion decides what to skip from the catalog's state rows, so a row that
disagrees with the store either hides lost text ("unchanged" while the chunks
are gone) or leaves chunks nobody tracks (never updated, never deleted). Writes
are ordered so that a crash never produces the first kind (see
``services/ingestion/ingest_pipeline.py`` and ``services/ingestion/sources.py``), but a data
directory restored from mismatched copies, edited by hand or damaged on disk
can hold anything. This check reads every state row and every chunk of every
tenant it knows and reports:

* ``missing_shard`` — a collection with vectors whose shard is gone. Repair:
  recreate it empty (its rows then report missing chunks, settled below).
* ``stale_state`` — rows of a shard that is no collection's any more. Repair: drop them.
* ``missing_chunks`` — a row lists chunks the store does not hold. Repair: the row
  keeps what is left and is marked ``modified`` (the next run writes the source
  again); a row with nothing left is dropped.
* ``orphan_chunks`` — ingested chunks that no row lists (leftovers of a source).
  Repair: delete them.
* ``interrupted_write`` — a first write that never finished (a row without hash).
  Repair: delete the chunks it wrote and drop the row.
* ``unstorable_text`` — a catalog row (a job, a collection's metadata) holding a lone
  surrogate or NUL, stored before requests were checked (issue 32; the embedded
  catalog only, :mod:`ragline.catalog.text_repair`). Repair: U+FFFD in place of a lone
  surrogate, NUL dropped.
* ``bad_record`` — a record in the store (any record, documents API ones included) holding
  a lone surrogate or NUL, or metadata nested deeper than a write takes, stored before
  requests were checked (issue 32). Repair (:mod:`ragline.services.ingestion.record_repair`, one
  decision per case, each logged): rewritten in place (U+FFFD, NUL dropped, a nested field
  flattened), or removed when its id is the bad value.
* ``missing_root`` — directory sources whose root no longer exists. A notice, not
  a problem: re-ingesting the tree from its new place takes them over.

Chunks count as ingested when their metadata carries what ingestion writes
(``parent_doc_id``, ``chunk_index``, ``content_hash``, ``source_hash``);
documents added through the documents API are never touched (``bad_record`` aside). Tenants checked:
those with state rows, plus the ones the caller names (API keys' tenants and
the default tenant).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ragline.catalog.ingest_state import StateRow
from ragline.catalog.tables import SourceStates
from ragline.core.filters import Eq
from ragline.core.types import CollectionInfo, Record
from ragline.providers.stores.base import VectorStore
from ragline.services.corpus.collections import CollectionService
from ragline.services.ingestion.record_repair import RecordFix, examine
from ragline.services.ingestion.sources import PAGE, root_exists

log = logging.getLogger(__name__)

PROBLEMS = ("missing_shard", "stale_state", "missing_chunks", "orphan_chunks",
            "interrupted_write", "unstorable_text", "bad_record")
NOTICES = ("missing_root",)
INGESTED_KEYS = ("parent_doc_id", "chunk_index", "content_hash", "source_hash")


@dataclass
class Finding:
    kind: str
    collection: str
    tenant: str | None
    source_id: str | None
    count: int
    message: str
    repaired: bool = False

    @property
    def problem(self) -> bool:
        return self.kind in PROBLEMS


@dataclass
class VerifyReport:
    collections: int = 0
    sources: int = 0
    chunks: int = 0
    repair: bool = False
    findings: list[Finding] = field(default_factory=list)

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.problem]

    @property
    def ok(self) -> bool:
        """Nothing wrong is left (none found, or every one repaired)."""
        return all(f.repaired for f in self.problems)

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "repair": self.repair, "collections": self.collections,
                "sources": self.sources, "chunks": self.chunks,
                "problems": len(self.problems),
                "repaired": sum(1 for f in self.problems if f.repaired),
                "findings": [{"kind": f.kind, "collection": f.collection, "tenant": f.tenant,
                              "source_id": f.source_id, "count": f.count,
                              "message": f.message, "repaired": f.repaired}
                             for f in self.findings]}


def is_ingested(metadata: dict[str, Any]) -> bool:
    return all(k in metadata for k in INGESTED_KEYS)


class VerifyService:
    def __init__(self, collections: CollectionService, store: VectorStore,
                 state: SourceStates) -> None:
        self.collections = collections
        self.store = store
        self.state = state

    def verify(self, *, repair: bool = False, collection: str | None = None,
               tenants: Iterable[str] = ()) -> VerifyReport:
        report = VerifyReport(repair=repair)
        infos = {c.name: c for c in self.collections.all()
                 if collection is None or c.name == collection}
        by_key: dict[tuple[str, str], list[StateRow]] = defaultdict(list)
        stale: list[StateRow] = []
        for row in self.state.rows():
            if collection is not None and row.collection != collection:
                continue
            info = infos.get(row.collection)
            if info is None or info.shard != row.shard:
                stale.append(row)
            else:
                by_key[(row.collection, row.tenant)].append(row)
        by_collection: dict[str, list[StateRow]] = defaultdict(list)
        for row in stale:
            by_collection[row.collection].append(row)
        for name, rows in sorted(by_collection.items()):
            f = Finding("stale_state", name, None, None, len(rows),
                        f"{len(rows)} state row(s) of a shard collection '{name}' no longer "
                        "uses")
            if repair:
                self.state.drop_rows(rows)
                f.repaired = True
            report.findings.append(f)
        extra = set(tenants)
        for info in infos.values():
            report.collections += 1
            self._shard(info, report, repair)
            names = {t for (c, t) in by_key if c == info.name} | extra
            for tenant in sorted(names):
                with self.state.writing(info.name, tenant):
                    self._tenant(info, tenant, by_key.get((info.name, tenant), []), report,
                                 repair)
        return report

    def settle_pending(self) -> int:
        """At start, before any job runs (the embedded catalog's single owner): settle
        every source a crash left ``pending`` (a first write that never finished) the
        way ``--repair`` settles an ``interrupted_write``: its chunks are deleted and its
        row dropped, so the next run writes it as new (issue 32). Returns how many."""
        infos = {c.name: c for c in self.collections.all()}
        pending = [r for r in self.state.rows() if r.source.source_hash is None]
        for row in pending:
            info = infos.get(row.collection)
            if (info is not None and info.shard == row.shard and info.dimension is not None
                    and self.store.has_shard(row.shard)):
                self.store.delete_where(row.shard, row.tenant,
                                        Eq("parent_doc_id", row.source.source_id))
        if pending:
            self.state.drop_rows(pending)
            log.warning("%d source(s) left pending by an interrupted first write were "
                        "settled (their chunks removed; the next run writes them again)",
                        len(pending))
        return len(pending)

    def _shard(self, info: CollectionInfo, report: VerifyReport, repair: bool) -> None:
        if info.dimension is None or self.store.has_shard(info.shard):
            return
        f = Finding("missing_shard", info.name, None, None, 1,
                    f"collection '{info.name}' has no shard in the store: its vectors are "
                    "lost (re-ingest the sources)")
        if repair:
            self.store.create_shard(info.shard, info.dimension)
            f.repaired = True
        report.findings.append(f)

    def _stored(self, info: CollectionInfo, tenant: str
                ) -> tuple[set[str], dict[str, str], list[RecordFix]]:
        """Every id of the tenant, the ingested ones with their parent source, and the
        records holding values no write takes (:func:`examine`)."""
        ids: set[str] = set()
        ingested: dict[str, str] = {}
        fixes: list[RecordFix] = []
        if info.dimension is None or not self.store.has_shard(info.shard):
            return ids, ingested, fixes
        offset = 0
        while True:
            page = self.store.list_page(info.shard, tenant, None, PAGE, offset)
            for rec in page.records:
                ids.add(rec.id)
                if is_ingested(rec.metadata):
                    ingested[rec.id] = str(rec.metadata["parent_doc_id"])
                fix = examine(rec)
                if fix is not None:
                    fixes.append(fix)
            offset += len(page.records)
            if not page.records or offset >= page.total:
                return ids, ingested, fixes

    def _bad_records(self, info: CollectionInfo, tenant: str, fixes: list[RecordFix],
                     report: VerifyReport, repair: bool) -> set[str]:
        """Report each record of ``fixes``; with ``repair`` rewrite or remove it (logged).
        Returns the ids removed."""
        removed: set[str] = set()
        for fix in fixes:
            rid = fix.record.id
            verb = "removed" if fix.removes else "rewritten"
            parent = fix.record.metadata.get("parent_doc_id")
            f = Finding("bad_record", info.name, tenant,
                        parent if isinstance(parent, str) else None, 1,
                        f"record {rid!r}: {'; '.join(fix.problems)}; "
                        f"{'' if repair else '--repair: '}{verb}: {'; '.join(fix.actions)}")
            report.findings.append(f)
            if not repair:
                continue
            try:
                if fix.replacement is None:
                    self.store.delete_ids(info.shard, tenant, [rid])
                    removed.add(rid)
                else:
                    self._rewrite(info, tenant, fix.replacement)
            except Exception as exc:  # one record a store cannot write: the rest go on
                f.message += f" (not repaired: {type(exc).__name__})"
                log.error("verify --repair: collection %r, tenant %r: %s", info.name, tenant,
                          f.message)
                continue
            f.repaired = True
            log.warning("verify --repair: collection %r, tenant %r: %s", info.name, tenant,
                        f.message)
        return removed

    def _rewrite(self, info: CollectionInfo, tenant: str, record: Record) -> None:
        """``record`` written over the stored one of its id, with the stored vector."""
        stored = self.store.get(info.shard, tenant, [record.id], with_vectors=True)
        if not stored or stored[0].embedding is None:
            raise LookupError("the stored vector could not be read")
        record.embedding = stored[0].embedding
        self.store.upsert(info.shard, [record])

    def _tenant(self, info: CollectionInfo, tenant: str, rows: list[StateRow],
                report: VerifyReport, repair: bool) -> None:
        name, shard = info.name, info.shard
        ids, ingested, fixes = self._stored(info, tenant)
        for rid in self._bad_records(info, tenant, fixes, report, repair):
            ids.discard(rid)  # removed: a state row listing it is settled below
            ingested.pop(rid, None)
        report.chunks += len(ingested)
        report.sources += len(rows)
        states = {r.source.source_id: r for r in rows}
        listed = {cid: sid for sid, r in states.items() for cid in r.source.chunk_ids}
        settle: dict[str, list[str]] = {}
        rootless = 0
        for sid, r in sorted(states.items()):
            s = r.source
            if s.source_hash is None:
                leftovers = sorted(i for i, p in ingested.items() if p == sid)
                f = Finding("interrupted_write", name, tenant, sid, len(leftovers),
                            f"source '{sid}': a first write that never finished "
                            f"({len(leftovers)} chunk(s) written)")
                if repair:
                    self.store.delete_ids(shard, tenant, leftovers)
                    self.state.drop_rows([r])
                    f.repaired = True
                report.findings.append(f)
                continue
            missing = [c for c in s.chunk_ids if c not in ids]
            if missing:
                f = Finding("missing_chunks", name, tenant, sid, len(missing),
                            f"source '{sid}': {len(missing)} of {len(s.chunk_ids)} chunk(s) "
                            "listed in the state are not in the store")
                settle[sid] = [c for c in s.chunk_ids if c in ids]
                f.repaired = repair
                report.findings.append(f)
            if root_exists(s.origin) is False:
                rootless += 1
        if rootless:
            report.findings.append(Finding(
                "missing_root", name, tenant, None, rootless,
                f"{rootless} source(s) were ingested from a directory that no longer exists "
                "(re-ingest the tree from its new place, or delete the sources)"))
        if repair and settle:
            self.state.settle(name, shard, tenant, settle)
        pending = {sid for sid, r in states.items() if r.source.source_hash is None}
        orphans: dict[str, list[str]] = defaultdict(list)
        for cid, parent in ingested.items():
            if listed.get(cid) != parent and parent not in pending:
                orphans[parent].append(cid)
        for parent, cids in sorted(orphans.items()):
            f = Finding("orphan_chunks", name, tenant, parent, len(cids),
                        f"source '{parent}': {len(cids)} chunk(s) in the store that no state "
                        "row lists")
            if repair:
                self.store.delete_ids(shard, tenant, sorted(cids))
                f.repaired = True
            report.findings.append(f)
