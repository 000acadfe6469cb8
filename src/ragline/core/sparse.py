"""Copies that keep sparse files sparse.

Qdrant Edge preallocates its files (WAL segments, mmap'd vector and payload
pages of 2-32 MB) as sparse files: a shard of a few KB of data has hundreds of
MB of apparent size. ``shutil.copy`` writes every hole out as zeros, so a
backup of a tiny collection would take 400 MB. These helpers copy only the
data ranges (``SEEK_DATA``/``SEEK_HOLE`` where the file system has them) and
turn runs of zeros read from a stream (a tar member) back into holes.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import IO

BLOCK = 1 << 16
PAGE = 4096  # file-system block: the smallest hole
_ZEROS = bytes(BLOCK)


def write_sparse(src: IO[bytes], dst: IO[bytes], size: int) -> None:
    """Copy ``size`` bytes from a stream at ``dst``'s position, seeking over all-zero blocks
    (holes). The caller sets the file's final length (``truncate``): a trailing hole is
    only a seek here."""
    left = size
    while left > 0:
        block = src.read(min(BLOCK, left))
        if not block:
            raise OSError("unexpected end of stream")
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


def copy_sparse(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> str:
    """``shutil.copy2`` that copies data ranges only; usable as copytree's copy_function."""
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        size = os.fstat(fi.fileno()).st_size
        try:
            pos = 0
            while pos < size:
                try:
                    start = os.lseek(fi.fileno(), pos, os.SEEK_DATA)
                except OSError:  # ENXIO: only a hole is left
                    break
                end = os.lseek(fi.fileno(), start, os.SEEK_HOLE)
                fi.seek(start)
                fo.seek(start)
                write_sparse(fi, fo, end - start)
                pos = end
            fo.truncate(size)
        except (AttributeError, OSError):  # no SEEK_DATA here: scan for zeros instead
            fi.seek(0)
            fo.seek(0)
            write_sparse(fi, fo, size)
            fo.truncate(size)
    shutil.copystat(src, dst)
    return str(dst)


def copy_tree_sparse(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, copy_function=copy_sparse)
