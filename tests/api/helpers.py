from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
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


class Keyed:
    """A client of a server with auth on, holding a key each for an admin of the default
    tenant (``admin``) and two users (``alice``, ``bob``): requests name who sends them."""

    def __init__(self, client: TestClient, keys: dict[str, str]) -> None:
        self.c = client
        self.keys = keys

    def h(self, who: str | None, **extra: str) -> dict[str, str]:
        """``who``'s key header (none for ``None``) and ``extra`` headers."""
        return ({"Authorization": f"Bearer {self.keys[who]}"} if who else {}) | extra

    def call(self, who: str | None, method: str, url: str, body: Any = None,
             **extra: str) -> Any:
        return self.c.request(method, url, json=body, headers=self.h(who, **extra))

    def get(self, who: str | None, url: str, **kw: Any) -> Any:
        return self.c.get(url, headers=self.h(who), **kw)

    def post(self, who: str | None, url: str, body: Any = None, **extra: str) -> Any:
        return self.call(who, "POST", url, body, **extra)

    def json(self, who: str | None, url: str) -> Any:
        """The body of a GET that must answer 200."""
        r = self.get(who, url)
        assert r.status_code == 200, r.text
        return r.json()


@contextmanager
def keyed_client(app: FastAPI) -> Iterator[Keyed]:
    """``app`` (a server with auth on) under a TestClient, with the three keys of
    :class:`Keyed` created by its owner."""
    with TestClient(app, base_url="http://localhost") as c:
        rl: Ragline = c.app.state.ragline  # type: ignore[attr-defined]
        me = rl.owner()
        yield Keyed(c, {"admin": rl.keys.create(me, "admin", "default", "ops")[1],
                        "alice": rl.keys.create(me, "user", "alice")[1],
                        "bob": rl.keys.create(me, "user", "bob")[1]})
