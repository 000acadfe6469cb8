"""The real-LLM tier: llama.cpp's server with SmolLM2-135M, started once per session.

Run with ``make test-llm`` (it builds the server's venv and points
``RAGLINE_LLAMA_PYTHON`` at it). Every test here is marked ``llm``; the default
``make test`` run deselects them, and they skip when the server's venv is missing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragline.testing.llama_server import RecordingProxy, llama_server, recording_proxy

ROOT = Path(__file__).parents[2]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/llm/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.llm)


@pytest.fixture(scope="session")
def llama_python() -> str:
    python = os.environ.get("RAGLINE_LLAMA_PYTHON") or str(ROOT / ".venv-llm" / "bin" / "python")
    if not Path(python).exists():
        pytest.skip("no llama.cpp server venv: run `make test-llm`")
    return python


@pytest.fixture(scope="session")
def llama_url(llama_python: str) -> Iterator[str]:
    with llama_server(llama_python) as url:
        yield url


@pytest.fixture
def proxy(llama_url: str) -> Iterator[RecordingProxy]:
    with recording_proxy(llama_url) as p:
        yield p
