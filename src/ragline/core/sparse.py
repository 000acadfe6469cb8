"""Copies that keep sparse files sparse.

Qdrant Edge preallocates its files (WAL segments, mmap'd vector and payload
pages of 2-32 MB) as sparse files: a shard of a few KB of data has hundreds of
MB of apparent size. ``shutil.copy`` writes every hole out as zeros, so a
backup of a tiny collection would take 400 MB. These helpers copy only the
data ranges (``SEEK_DATA``/``SEEK_HOLE`` where the file system has them) and
turn runs of zeros read from a stream (a tar member) back into holes.

Archives (``POST /admin/backup``) store such files as GNU sparse members
(PAX format 1.0, which GNU tar, bsdtar and Python's ``tarfile`` read): the
data ranges and a map of them, not the zeros between. A tiny collection's
shard was ~1 s of reading and gzipping hundreds of MB of zeros; with the map
it is its few KB of data.
"""

from __future__ import annotations

import errno
import io
import os
import shutil
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Protocol, cast

BLOCK = 1 << 16
PAGE = 4096  # file-system block: the smallest hole
_ZEROS = bytes(BLOCK)
_USTAR_SIZE = 8 << 30  # the largest size a tar header's own size field holds


class Readable(Protocol):
    def read(self, size: int, /) -> bytes: ...


def write_sparse(src: Readable, dst: IO[bytes], size: int) -> None:
    """Copy ``size`` bytes from a stream at ``dst``'s position, seeking over all-zero blocks
    (holes). The caller sets the file's final length (``truncate``): a trailing hole is
    only a seek here."""
    left = size
    while left > 0:
        block = src.read(min(BLOCK, left))
        if not block:
            raise EOFError("unexpected end of stream")
        if block == _ZEROS[: len(block)]:
            dst.seek(len(block), os.SEEK_CUR)
        else:  # data somewhere in it: keep its all-zero pages as holes
            for i in range(0, len(block), PAGE):
                page = block[i:i + PAGE]
                if page == _ZEROS[: len(page)]:
                    dst.seek(len(page), os.SEEK_CUR)
                else:
                    dst.write(page)
        left -= len(block)


def data_ranges(fd: int, size: int) -> list[tuple[int, int]]:
    """The ``(offset, length)`` ranges of a file that hold data, by ``SEEK_DATA`` and
    ``SEEK_HOLE``; the whole file as one range where the file system cannot tell."""
    ranges: list[tuple[int, int]] = []
    pos = 0
    try:
        while pos < size:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # only a hole is left
                    break
                raise
            end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
            ranges.append((start, end - start))
            pos = end
    except (AttributeError, OSError):  # no SEEK_DATA here
        return [(0, size)] if size else []
    return ranges


def copy_sparse(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> str:
    """``shutil.copy2`` that copies data ranges only; usable as copytree's copy_function."""
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        size = os.fstat(fi.fileno()).st_size
        for start, length in data_ranges(fi.fileno(), size):
            fi.seek(start)
            fo.seek(start)
            write_sparse(fi, fo, length)
        fo.truncate(size)
    shutil.copystat(src, dst)
    return str(dst)


class _Chunks(io.RawIOBase):
    """A readable stream over an iterator of byte strings (``tarfile`` copies a member's
    data with ``read``, and wants every read full until the end)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._buf = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self._buf:
            self._buf = next(self._chunks, b"")
            if not self._buf:
                return 0
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


def add_sparse(tar: tarfile.TarFile, path: Path, arcname: str) -> None:
    """Add a regular file to ``tar``: as a GNU sparse 1.0 member when it has holes, so
    the archive carries its data ranges and not the zeros between them."""
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        ranges = data_ranges(f.fileno(), st.st_size)
        stored = sum(n for _, n in ranges)
        sparse_map = "".join(f"{n}\n" for pair in ranges for n in pair)
        prefix = f"{len(ranges)}\n{sparse_map}".encode()
        prefix += bytes(-len(prefix) % tarfile.BLOCKSIZE)
        if stored >= st.st_size or len(prefix) + stored >= _USTAR_SIZE:
            # no holes, or a member whose size needs a pax "size" record (which tarfile
            # would read as the real size): a plain member
            info = tar.gettarinfo(fileobj=f, arcname=arcname)
            f.seek(0)  # the lseeks above moved the descriptor
            tar.addfile(info, f)
            return
        head, _, base = arcname.rpartition("/")
        info = tarfile.TarInfo(f"{head}/GNUSparseFile.0/{base}" if head
                               else f"GNUSparseFile.0/{base}")
        info.size = len(prefix) + stored
        info.mode, info.mtime = st.st_mode & 0o7777, int(st.st_mtime)
        # "path" first: tarfile adds it for long names, after ours, and the last of the
        # two names wins when it reads them back
        info.pax_headers = {"path": info.name, "GNU.sparse.major": "1",
                            "GNU.sparse.minor": "0", "GNU.sparse.name": arcname,
                            "GNU.sparse.realsize": str(st.st_size)}

        def chunks() -> Iterator[bytes]:
            yield prefix
            for start, length in ranges:
                f.seek(start)
                left = length
                while left:
                    block = f.read(min(BLOCK, left))
                    if not block:
                        raise OSError(f"{arcname} shrank while it was archived")
                    left -= len(block)
                    yield block

        tar.addfile(info, io.BufferedReader(_Chunks(chunks()), BLOCK))


def extract_sparse(tar: tarfile.TarFile, member: tarfile.TarInfo, dst: IO[bytes]) -> None:
    """Write a regular member's data at ``dst``: a sparse member's data ranges only (its
    map checked: ordered, inside the file), another's with its zero runs as holes.

    A sparse member's ranges are read straight from the archive, one after the other
    (``extractfile`` would make every hole's zeros, and cannot seek in a stream)."""
    # typeshed says int; tarfile sets the list of (offset, length) pairs it read
    sparse = cast("list[tuple[int, int]] | None", member.sparse)
    if sparse is None:
        src = tar.extractfile(member)
        assert src is not None  # a regular file
        write_sparse(src, dst, member.size)
    else:
        raw = tar.fileobj
        assert raw is not None  # an open archive
        raw.seek(member.offset_data)
        end = 0
        for start, length in sparse:
            if start < end or length < 0 or start + length > member.size:
                raise ValueError("the sparse map of a member is not ordered or inside it")
            dst.seek(start)
            write_sparse(raw, dst, length)
            end = start + length
    dst.truncate(member.size)


def copy_tree_sparse(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, copy_function=copy_sparse)
