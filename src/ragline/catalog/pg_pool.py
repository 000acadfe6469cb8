"""Borrowing a connection of the PostgreSQL catalog, with its failures translated.

A lost server, a full pool or a closed one surface from psycopg as
``OperationalError``; at this boundary they become :class:`CatalogUnavailable`
(503, "try again"), so a request gets an answer that says what is wrong instead of
a 500 with an error id, and no DSN or host ever reaches a message.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from ragline.errors import CatalogUnavailable


@contextmanager
def connection(pool: ConnectionPool[Any]) -> Iterator[psycopg.Connection[Any]]:
    """``pool.connection()`` (a transaction: committed at the end, rolled back on error)."""
    try:
        with pool.connection() as conn:
            yield conn
    except psycopg.OperationalError as exc:
        raise CatalogUnavailable(f"the PostgreSQL catalog is unavailable "
                                 f"({type(exc).__name__})") from None
