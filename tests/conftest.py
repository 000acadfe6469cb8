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
    # localhost: the Host guard refuses TestClient's default "testserver"; the key
    # header: POSTs without a JSON body need one (issue 10, api/middleware.py)
    with TestClient(create_app(settings), base_url="http://localhost",
                    headers={"X-API-Key": "test"}) as c:
        yield c
