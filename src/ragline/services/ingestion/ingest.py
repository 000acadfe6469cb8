"""Incremental ingestion: a directory tree, an upload, a URL or a text into a collection.

A directory run compares each file's SHA-256 with the ingestion state and
touches only what changed: unchanged files are neither parsed, embedded nor
written; changed and new files are chunked and written in the crash-safe order
of :mod:`ragline.services.ingestion.ingest_pipeline`; files that disappeared lose their
chunks and their state. Modes:

* ``incremental`` — the above; chunks whose text did not change keep their
  vectors (read back from the store), so only new text is embedded.
* ``full`` — every file is re-chunked and re-embedded (a model update, a
  suspicion); stale chunks are still removed.
* ``recreate`` — the tree is rebuilt into a fresh shard, which then replaces
  the collection's shard in one catalog transaction: searches keep answering
  from the old contents until the new ones are complete. Collection metadata
  and embedding settings are kept; other tenants' points in that collection
  are not carried over (a rebuild is an admin operation on a whole collection).

Runs on the same (collection, tenant) are serialised; a collection that does
not exist is created with the default embedder.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path, PurePosixPath

from ragline.catalog.ingest_state import SourceState
from ragline.catalog.tables import SourceStates
from ragline.core.types import CollectionInfo
from ragline.errors import CollectionExists, InvalidInput, SourceNotFound, TooManyRequests
from ragline.ingest import load_bytes, load_text, sha256_hex
from ragline.ingest.loader import tree_sources
from ragline.ingest.types import SourceDocument
from ragline.providers.stores.base import VectorStore
from ragline.services.corpus.collections import CollectionService, new_shard_key
from ragline.services.corpus.diskspace import DiskGuard
from ragline.services.corpus.embedders import EmbedderPool
from ragline.services.ingestion.fetcher import UrlFetcher
from ragline.services.ingestion.ingest_pipeline import Pipeline, Prepared, Target
from ragline.services.ingestion.ingest_stats import (
    DocumentResult,
    IngestStats,
    Progress,
    capture_warnings,
    check_mode,
)
from ragline.services.ingestion.ingest_target import (
    book_id_of,
    build_target,
    frontmatter_defaults,
    parser_limits,
)
from ragline.settings import Settings

log = logging.getLogger(__name__)

FLUSH_RECORDS = 512


class IngestService:
    def __init__(self, settings: Settings, collections: CollectionService, store: VectorStore,
                 embedders: EmbedderPool, state: SourceStates,
                 disk: DiskGuard | None = None) -> None:
        self.settings = settings
        self.limits = parser_limits(settings)  # handed to every parser (HTML, PDF budgets)
        self.fetcher = UrlFetcher(settings, self.limits)
        self.disk = disk or DiskGuard.unlimited()
        self._upload_slots = threading.BoundedSemaphore(settings.max_concurrent_uploads)
        self.collections = collections
        self.store = store
        self.embedders = embedders
        self.state = state
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._guard = threading.Lock()

    def lock(self, collection: str, tenant: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault((collection, tenant), threading.Lock())

    # -- collection and target ----------------------------------------------------------
    def ensure_collection(self, name: str) -> CollectionInfo:
        """The collection, created with the default embedder if missing, with its shard."""
        info = self.collections.find(name)
        if info is None:
            try:
                info = self.collections.create(name, embed={
                    "provider": self.settings.default_embedder,
                    "model": self.settings.default_embedding_model})
            except CollectionExists:
                info = self.collections.get(name)
        if not self.embedders.known(info.embedding_provider):
            raise InvalidInput(
                f"Collection '{name}' has no embedding provider ragline can run, so it cannot "
                "ingest text; create it with 'embed' or use another collection")
        with self.collections.lock(name):
            info = self.collections.get(name)
            if info.dimension is None:  # a hosted model tells its dimension on first use
                assert info.embedding_provider is not None
                emb = self.embedders.get(info.embedding_provider, info.embedding_model)
                self.collections.set_dimension(name, emb.dimension)
                info = self.collections.get(name)
            assert info.dimension is not None
            if not self.store.has_shard(info.shard):
                self.disk.check("create the collection's shard")
                self.store.create_shard(info.shard, info.dimension)
        return info

    def target(self, info: CollectionInfo, tenant: str, reuse: bool) -> Target:
        return build_target(self.settings, self.embedders, info, tenant, reuse)

    def _pipeline(self, target: Target, stats: IngestStats, progress: Progress | None,
                  should_stop: Callable[[], bool] | None, background: bool = False) -> Pipeline:
        s = self.settings
        return Pipeline(self.store, self.state, target, stats, batch_size=s.ingest_batch_size,
                        retry_attempts=s.ingest_retry_attempts, retry_wait=s.ingest_retry_wait_s,
                        retry_max_wait=s.ingest_retry_max_wait_s, progress=progress,
                        should_stop=should_stop, background_writes=background,
                        disk=self.disk)

    # -- directories -------------------------------------------------------------------
    def check_root(self, path: str | Path, *, local: bool = True) -> Path:
        """The directory to ingest, resolved.

        ``local`` callers (the CLI, library code) may name any directory. Network callers
        may name only absolute paths under ``ingest_allowed_roots`` (none configured: all
        refused), and a path outside the roots gets the same answer whether it exists or
        not, so the API cannot be used to probe the server's file system.
        """
        if not local:
            allowed = self.settings.ingest_allowed_roots
            if not allowed:
                raise InvalidInput(
                    "Directory ingestion over HTTP is off: no ingestion roots are configured "
                    "(set RAGLINE_INGEST_ALLOWED_ROOTS to a JSON list of directories, e.g. "
                    "'[\"/srv/docs\"]', or use 'ragline ingest' on the server)")
            if not Path(path).is_absolute():
                raise InvalidInput(f"Path {str(path)!r} must be absolute (relative paths are "
                                   "refused)")
            root = Path(path).resolve()
            if not any(root.is_relative_to(Path(a).resolve()) for a in allowed):
                raise InvalidInput(f"Path {str(path)!r} is not under an allowed ingestion root "
                                   "(RAGLINE_INGEST_ALLOWED_ROOTS lists the directories the "
                                   "server may read)")
        root = Path(path).expanduser().resolve()
        if not root.is_dir():
            raise InvalidInput(f"Path {str(path)!r} does not exist or is not a directory")
        return root

    def run_directory(self, collection: str, tenant: str, path: str | Path,
                      mode: str = "incremental", *, restrict: list[str] | None = None,
                      progress: Progress | None = None,
                      should_stop: Callable[[], bool] | None = None,
                      stats: IngestStats | None = None) -> IngestStats:
        """Bring ``collection`` in line with the tree at ``path`` (see the module docstring).

        ``restrict`` limits the run to these relative paths (a webhook's changed
        files): each is added, updated or, if gone, deleted; nothing else is read.
        ``stats`` (optional) is updated in place, so a caller still has the
        counters of a run that failed half-way.
        """
        mode = check_mode(mode)
        root = self.check_root(path)
        if restrict is not None and mode == "recreate":
            raise InvalidInput("mode 'recreate' rebuilds everything; it takes no path list")
        stats = stats if stats is not None else IngestStats()
        self.ensure_collection(collection)
        with self.lock(collection, tenant), capture_warnings(stats):
            info = self.collections.get(collection)
            if mode == "recreate":
                self._recreate(info, tenant, root, stats, progress, should_stop)
            else:
                target = self.target(info, tenant, reuse=mode == "incremental")
                self._sync_tree(target, root, restrict, stats, progress, should_stop)
        if progress is not None:
            progress(stats)
        return stats

    def _recreate(self, info: CollectionInfo, tenant: str, root: Path, stats: IngestStats,
                  progress: Progress | None, should_stop: Callable[[], bool] | None) -> None:
        assert info.dimension is not None
        new = new_shard_key()
        self.disk.check("rebuild the collection")
        self.store.create_shard(new, info.dimension)
        try:
            target = self.target(replace(info, shard=new), tenant, reuse=False)
            self._sync_tree(target, root, None, stats, progress, should_stop)
            previous = self.store.count(info.shard, tenant, None)
            self.collections.replace_shard(info.name, info.shard, new)
        except BaseException:
            self.store.drop_shard(new)
            self.state.purge_stale({c.name: c.shard for c in self.collections.all()})
            raise
        stats.chunks_deleted += previous
        self.state.purge_stale({c.name: c.shard for c in self.collections.all()})

    def _sync_tree(self, target: Target, root: Path, restrict: list[str] | None,
                   stats: IngestStats, progress: Progress | None,
                   should_stop: Callable[[], bool] | None) -> None:
        origin = f"dir:{root}"
        target = replace(target, book_id=book_id_of(self.settings, target.info, root))
        files = tree_sources(root, self.settings.ingest_patterns)
        info, tenant = target.info, target.tenant
        states = self.state.sources(info.name, info.shard, tenant)
        adopted = moved_roots(states, origin, files)
        if adopted:
            n = sum(1 for s in states.values() if s.origin in adopted)
            stats.warn(f"{n} source(s) of {len(adopted)} earlier root(s) that no longer "
                       "exist are now tracked under this one (moved or renamed)")
        mine = {sid: s for sid, s in states.items() if s.origin == origin or s.origin in adopted}
        if restrict is not None:
            wanted = {str(PurePosixPath(p.replace("\\", "/").lstrip("/"))) for p in restrict}
            files = {sid: f for sid, f in files.items() if f[0] in wanted}
            gone = [s for sid, s in mine.items() if s.source_path in wanted and sid not in files]
        else:
            gone = [s for sid, s in mine.items() if sid not in files]
        stats.files_seen = stats.files_total = len(files)
        pipe = self._pipeline(target, stats, progress, should_stop, background=True)
        try:
            self._write_tree(pipe, files, states, origin, gone, adopted)
        except BaseException:
            pipe.close(quiet=True)  # a write in flight finishes; the first error wins
            raise
        pipe.close()
        moved = [sid for sid in files if sid in states and states[sid].origin in adopted]
        if moved:  # unchanged files of a moved tree: same chunks, only the origin is new
            self.state.retag(info.name, info.shard, tenant, moved, origin)

    def _write_tree(self, pipe: Pipeline, files: dict[str, tuple[str, Path]],
                    states: dict[str, SourceState], origin: str, gone: list[SourceState],
                    adopted: frozenset[str] = frozenset()) -> None:
        pipe.remember_vectors(gone)
        group: list[Prepared] = []
        pending = 0
        for sid, (rel, file) in files.items():
            pipe.check_stop()
            prepared = self._prepare_file(pipe, sid, rel, file, origin, states.get(sid),
                                          adopted)
            pipe.report()
            if prepared is None:
                continue
            group.append(prepared)
            pending += sum(1 for r in prepared.records if r.embedding is None)
            if pending >= self.settings.ingest_batch_size or \
                    sum(len(p.records) for p in group) >= FLUSH_RECORDS:
                pipe.flush(group)
                group, pending = [], 0
        pipe.flush(group)
        pipe.drain()
        for old in gone:
            pipe.check_stop()
            pipe.delete_source(old)
            pipe.stats.files_deleted += 1
            pipe.report()

    def _prepare_file(self, pipe: Pipeline, sid: str, rel: str, file: Path, origin: str,
                      old: SourceState | None,
                      adopted: frozenset[str] = frozenset()) -> Prepared | None:
        stats, t = pipe.stats, pipe.t
        try:
            data = file.read_bytes()
        except OSError as exc:
            stats.files_failed += 1
            stats.warn(f"{rel}: cannot read ({exc.strerror}); left as it was")
            return None
        digest = sha256_hex(data)
        if (t.reuse and old is not None and old.source_hash == digest
                and old.status != "modified"
                and old.source_path == rel and old.fingerprint == t.fingerprint
                and (old.origin == origin or old.origin in adopted)):
            stats.files_skipped += 1
            return None
        doc: SourceDocument | None
        try:
            doc = load_bytes(data, rel, defaults=t.defaults, path_pattern=t.path_pattern,
                             frontmatter_defaults=t.frontmatter_defaults, limits=self.limits)
        except InvalidInput as exc:  # empty or unreadable: the source has no chunks now
            stats.files_failed += 1
            stats.warn(f"{exc.message}; its chunks are removed")
            doc = None
        entry = SourceState(sid, origin, rel, digest, [])
        return pipe.prepare(entry, doc, old)

    # -- single sources (hermitAI) -----------------------------------------------------
    def ingest_document(self, collection: str, tenant: str, doc: SourceDocument,
                        origin: str) -> DocumentResult:
        """Write one parsed source (replacing an earlier version with the same source id)."""
        self.ensure_collection(collection)
        stats = IngestStats(files_total=1, files_seen=1)
        with self.lock(collection, tenant):
            info = self.collections.get(collection)
            target = self.target(info, tenant, reuse=True)
            old = self.state.source(info.name, info.shard, tenant, doc.source_id)
            if (old is not None and old.source_hash == doc.source_hash
                    and old.status != "modified" and old.fingerprint == target.fingerprint):
                return DocumentResult(doc.source_id, doc.title, len(old.chunk_ids), 0, 0, True)
            pipe = self._pipeline(target, stats, None, None)
            entry = SourceState(doc.source_id, origin, doc.source_path, doc.source_hash, [])
            prepared = pipe.prepare(entry, doc, old)
            pipe.flush([prepared])
        return DocumentResult(doc.source_id, doc.title, len(prepared.records),
                              stats.chunks_created, stats.texts_embedded, False)

    def ingest_bytes(self, collection: str, tenant: str, data: bytes,
                     filename: str, relative_path: str | None = None) -> DocumentResult:
        """One uploaded file. With ``relative_path`` (its place in a tree, as the CLI's
        upload fallback sends it) it becomes the source a directory run would make of
        it: the same source id, path metadata and chunks; without, ``upload/<name>``."""
        name = PurePosixPath(filename.replace("\\", "/")).name
        if not name:
            raise InvalidInput("the uploaded file has no name")
        if relative_path is not None:
            rel = upload_relative_path(relative_path)
            info = self.ensure_collection(collection)
            t = self.target(info, tenant, reuse=True)
            doc = load_bytes(data, rel, defaults=t.defaults, path_pattern=t.path_pattern,
                             frontmatter_defaults=t.frontmatter_defaults, limits=self.limits)
        else:
            found = self.collections.catalog.find_collection(collection)
            doc = load_bytes(data, name, source_id=f"upload/{name}",
                             defaults=self.settings.ingest_defaults,
                             frontmatter_defaults=frontmatter_defaults(self.settings, found),
                             limits=self.limits)
        doc.metadata["original_filename"] = name
        return self.ingest_document(collection, tenant, doc, "upload")

    def ingest_text(self, collection: str, tenant: str, text: str,
                    title: str | None = None) -> DocumentResult:
        doc = load_text(text, title=title, metadata=self.settings.ingest_defaults)
        return self.ingest_document(collection, tenant, doc, "text")

    def ingest_url(self, collection: str, tenant: str, url: str) -> DocumentResult:
        return self.ingest_document(collection, tenant, self.fetcher.fetch(url), "url")

    @contextmanager
    def upload_slot(self) -> Iterator[None]:
        """Hold one of ``max_concurrent_uploads`` slots while an upload is read and
        processed; none free: 429 at once, before the body is read (issue 10)."""
        if not self._upload_slots.acquire(blocking=False):
            raise TooManyRequests(
                f"Too many uploads in progress (setting max_concurrent_uploads="
                f"{self.settings.max_concurrent_uploads}); retry shortly", retry_after=2)
        try:
            yield
        finally:
            self._upload_slots.release()

    async def fetch_url_async(self, url: str) -> SourceDocument:
        """Fetch on the fetch pool without holding the caller's thread (see fetcher.py)."""
        return await self.fetcher.fetch_async(url)

    def delete_source(self, collection: str, tenant: str, source_id: str) -> int:
        """Remove one source's chunks and state (e.g. a user deleting an upload)."""
        info = self.collections.get(collection)
        with self.lock(collection, tenant):
            old = self.state.source(info.name, info.shard, tenant, source_id)
            if old is None:
                raise SourceNotFound(f"Source '{source_id}' not found in collection "
                                     f"'{collection}'")
            stats = IngestStats()
            self._pipeline(self.target(info, tenant, True), stats, None, None).delete_source(old)
        return stats.chunks_deleted

    def state_of(self, collection: str, tenant: str, source_id: str) -> SourceState | None:
        info = self.collections.find(collection)
        return self.state.source(collection, info.shard, tenant, source_id) if info else None


def upload_relative_path(path: str) -> str:
    """An upload's place in its tree (``a/x/README.md``): relative, POSIX, inside the root;
    anything else is refused before a byte is written."""
    posix = path.replace("\\", "/")
    parts = PurePosixPath(posix).parts
    if not parts or posix.startswith("/") or ".." in parts or ":" in parts[0]:
        raise InvalidInput(f"'path' must be a relative path inside the ingestion root "
                           f"(e.g. a/x/README.md), not {path!r}")
    return str(PurePosixPath(posix))


def moved_roots(states: dict[str, SourceState], origin: str,
                files: dict[str, tuple[str, Path]]) -> frozenset[str]:
    """Directory origins this run takes over: roots that no longer exist on disk and
    share at least one source id with the tree being ingested (it was moved or renamed).

    Their sources then belong to this root, so files missing from it lose their chunks
    instead of staying behind forever. A root that still exists is another tree and is
    left alone; so is a missing one that shares nothing with this tree (an unmounted
    disk holding a different book)."""
    shared: set[str] = set()
    for sid, s in states.items():
        if s.origin != origin and s.origin.startswith("dir:") and sid in files:
            shared.add(s.origin)
    return frozenset(o for o in shared if not Path(o[len("dir:"):]).is_dir())
