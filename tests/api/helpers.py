from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from ragline.api import errors
from ragline.api.routes import rerank as rerank_route
from ragline.facade import Ragline
from ragline.settings import Settings


def make_collection(client: TestClient, name: str = "docs", **body: Any) -> dict[str, Any]:
    r = client.post("/collections", json={"name": name, **body})
    assert r.status_code == 201, r.text
    return r.json()


def add(client: TestClient, name: str, docs: list[dict[str, Any]]) -> dict[str, Any]:
    r = client.post(f"/collections/{name}/documents", json={"documents": docs})
    assert r.status_code == 200, r.text
    return r.json()


def doc(i: int, dim: int = 4, **meta: Any) -> dict[str, Any]:
    emb = [0.0] * dim
    emb[i % dim] = 1.0
    emb[(i + 1) % dim] = 0.1 * (i % 7 + 1)
    return {"id": f"d{i}", "text": f"text {i}", "metadata": meta, "embedding": emb}


def local_client(app: Any, **kwargs: Any) -> TestClient:
    """A TestClient that passes the request guard (issue 10): a Host the server answers to
    (TestClient's default "testserver" is refused) and the key header POSTs need."""
    return TestClient(app, base_url="http://localhost", headers={"X-API-Key": "test"},
                      **kwargs)


def rerank_app(cross_encoder: Any) -> FastAPI:
    """The rerank router and the real error handlers over a real (empty) Ragline whose
    reranker is replaced by ``cross_encoder``."""
    app = FastAPI()
    errors.install(app)
    app.include_router(rerank_route.router)
    rl = Ragline(Settings(_env_file=None, data_dir=Path(tempfile.mkdtemp()))).start()
    rl.services.reranker.current = cross_encoder
    app.state.ragline = rl
    return app
