"""Metadata and ids that follow from where a file sits in the source tree.

The RoboLearn book (spec 004) is laid out as
``docs/module-N-name/chapter-N-name/NN-lesson.md``; the position gives
``module``, ``chapter`` and ``lesson`` even when the frontmatter omits them,
and the filters in ``/search`` need them as integers.

Default fields (each only when the path has it):

=============== ======= ====================================================
``module``      int     N of the nearest ``module-N...`` directory
``module_name`` str     that directory's name, e.g. ``"module-1-ros2"``
``chapter``     int     N of the nearest ``chapter-N...`` directory
``chapter_name``str     that directory's name, e.g. ``"chapter-4-first-code"``
``lesson``      int     NN of a file named ``NN-...`` / ``NN_...`` (not README)
=============== ======= ====================================================

Other layouts pass a regular expression with named groups instead; it is
searched in the relative POSIX path and groups made only of digits become ints.
"""

from __future__ import annotations

import re
from pathlib import PurePath, PurePosixPath

from ragline.errors import InvalidInput
from ragline.ingest.types import Metadata

_MODULE_RE = re.compile(r"^module-(\d+)(?:\b|[-_])", re.I)
_CHAPTER_RE = re.compile(r"^chapter-(\d+)(?:\b|[-_])", re.I)
_LESSON_RE = re.compile(r"^(\d+)[-_.]")


def to_posix(path: str | PurePath) -> str:
    """A relative path with ``/`` separators whatever the OS wrote."""
    return PurePath(path).as_posix() if isinstance(path, PurePath) else path.replace("\\", "/")


def parent_doc_id(relative_path: str | PurePath) -> str:
    """The stable id of a source file: its relative POSIX path without extension.

    ``module-1-ros2/chapter-4-first-code/02-writing-publisher.md`` →
    ``module-1-ros2/chapter-4-first-code/02-writing-publisher``. It survives
    edits (so chunk ids of untouched chunks survive too), is readable in logs
    and URLs (``GET /lesson/{parent_doc_id:path}``), and changes on a rename,
    which the pipeline treats as delete + add.
    """
    posix = PurePosixPath(to_posix(relative_path).lstrip("/"))
    if not posix.parts or ".." in posix.parts:
        raise InvalidInput(f"not a relative path inside the source root: {relative_path}")
    return str(posix.with_suffix("")) if posix.suffix else str(posix)


def _typed(value: str) -> str | int:
    return int(value) if value.isdigit() else value


def extract_path_metadata(
    relative_path: str | PurePath, pattern: str | re.Pattern[str] | None = None
) -> Metadata:
    """Metadata implied by the file's position (see the module docstring).

    With ``pattern``, its named groups that matched are returned instead
    (digit-only values as ``int``); no match gives ``{}``.
    """
    posix = to_posix(relative_path)
    if pattern is not None:
        m = re.search(pattern, posix)
        if m is None:
            return {}
        return {k: _typed(v) for k, v in m.groupdict().items() if v is not None}

    parts = PurePosixPath(posix).parts
    meta: Metadata = {}
    for directory in parts[:-1]:
        if m := _MODULE_RE.match(directory):
            meta["module"], meta["module_name"] = int(m.group(1)), directory
        elif m := _CHAPTER_RE.match(directory):
            meta["chapter"], meta["chapter_name"] = int(m.group(1)), directory
    if parts and (m := _LESSON_RE.match(parts[-1])):
        meta["lesson"] = int(m.group(1))
    return meta
