"""A real ``ragline serve`` (auth on, tiny cross-encoder, local embedder) for the client tests.

One server per module: starting one costs a few seconds, and every test works in
collections of its own.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ragline.testing.cross_encoder import tiny_cross_encoder_dir
from tests.live_server import LiveServer

BOOK = Path(__file__).resolve().parents[1] / "fixtures" / "book"


@dataclass
class Served:
    url: str
    admin_key: str
    data_dir: Path
    docs_root: Path
    server: LiveServer


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("client-server")
    docs = root / "docs"
    docs.mkdir()
    (docs / "robots.md").write_text("# Robots\n\nRobots sense the world with lidar and "
                                    "cameras.\n\nThey move with motors.\n")
    (docs / "bananas.md").write_text("# Bananas\n\nBananas are yellow fruit.\n")
    server = LiveServer(root / "data", "--cross-encoder-path", str(tiny_cross_encoder_dir()),
                        env={"RAGLINE_AUTH": "on",
                             "RAGLINE_INGEST_ALLOWED_ROOTS": json.dumps([str(root)])})
    try:
        server.wait_ready()
        key = (root / "data" / "admin-key.txt").read_text().strip()
        yield Served(server.url, key, root / "data", docs, server)
    finally:
        server.stop()


@pytest.fixture
def name() -> str:
    """A collection name no other test uses."""
    return f"c{uuid.uuid4().hex[:10]}"
