"""The one exception hierarchy, pinned: its drawing, its HTTP mapping and the body shape.

Fails when a ``RaglineError`` subclass exists anywhere in ragline but is missing from
the drawing in ``ragline.errors``' docstring, is drawn under another parent, with
another status or code, or lives outside ``ragline.errors``.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
import re

import pytest
from fastapi import FastAPI
from pydantic import BaseModel

import ragline
from ragline import errors
from ragline.api import errors as http_errors
from ragline.errors import RaglineError
from tests.api.helpers import local_client

LINE = re.compile(r"^(?P<indent>[ │]*)(?:[├└]── )?(?P<name>[A-Z]\w+)\s+(?P<status>\d{3})\s+"
                  r"(?P<code>[a-z_]+)\s*$")


def drawn() -> dict[str, tuple[str | None, int, str]]:
    """name -> (parent name, status, code), read from the docstring's tree."""
    out: dict[str, tuple[str | None, int, str]] = {}
    stack: list[tuple[int, str]] = []
    for raw in (errors.__doc__ or "").splitlines():
        m = LINE.match(raw)
        if not m:
            continue
        depth = raw.index(m["name"])
        while stack and stack[-1][0] >= depth:
            stack.pop()
        out[m["name"]] = (stack[-1][1] if stack else None, int(m["status"]), m["code"])
        stack.append((depth, m["name"]))
    return out


def all_subclasses() -> list[type[RaglineError]]:
    for mod in pkgutil.walk_packages(ragline.__path__, "ragline."):
        try:
            importlib.import_module(mod.name)
        except ImportError:  # an optional extra that is not installed
            continue
    seen: list[type[RaglineError]] = []
    todo: list[type[RaglineError]] = [RaglineError]
    while todo:
        cls = todo.pop()
        seen.append(cls)
        todo.extend(cls.__subclasses__())
    return seen


def test_every_error_class_is_drawn_with_its_parent_status_and_code() -> None:
    tree = drawn()
    assert "RaglineError" in tree and "InvalidInput" in tree  # the parser reads the drawing
    for cls in all_subclasses():
        assert cls.__module__ == "ragline.errors", f"{cls.__qualname__} lives in {cls.__module__}"
        assert cls.__name__ in tree, f"{cls.__name__} is not drawn in ragline.errors"
        parent, status, code = tree[cls.__name__]
        base = cls.__bases__[0].__name__ if cls is not RaglineError else None
        assert (parent, status, code) == (base, cls.status, cls.code), cls.__name__
    assert set(tree) == {c.__name__ for c in all_subclasses()}  # nothing drawn that is gone


def test_the_drawing_parser_catches_an_undrawn_class() -> None:
    class Undrawn(errors.NotFound):  # a deliberate violation
        code = "undrawn"

    try:
        names = {c.__name__ for c in all_subclasses()}
        assert "Undrawn" in names and "Undrawn" not in drawn()
    finally:
        del Undrawn
        import gc

        gc.collect()


class Body(BaseModel):
    n: int


def app_raising() -> FastAPI:
    app = FastAPI()
    http_errors.install(app)

    @app.get("/raise/{name}")
    def boom(name: str) -> None:
        cls = next(c for c in all_subclasses() if c.__name__ == name)
        if cls.__init__ is not RaglineError.__init__ and cls.__name__ == "CollectionNotFound":
            raise cls("x")  # type: ignore[call-arg]
        raise cls(f"{name} happened")

    @app.get("/bug")
    def bug() -> None:
        raise ValueError("secret /srv/data/catalog.sqlite3 sk-live-123")

    @app.post("/typed")
    def typed(body: Body) -> int:
        return body.n

    return app


def test_every_error_becomes_its_status_with_one_body_shape() -> None:
    with local_client(app_raising(), raise_server_exceptions=False) as c:
        for cls in all_subclasses():
            r = c.get(f"/raise/{cls.__name__}")
            assert r.status_code == cls.status, cls.__name__
            body = r.json()
            # a 500 also carries the id its log line has (issue 10)
            extra = {"error_id"} if cls.status == 500 else set()
            assert set(body) == {"detail", "error", "message"} | extra, cls.__name__
            assert body["error"] == cls.code and body["detail"] == body["message"]


def test_unexpected_errors_answer_an_error_id_and_never_their_text(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR), \
            local_client(app_raising(), raise_server_exceptions=False) as c:
        r = c.get("/bug")
    assert r.status_code == 500
    body = r.json()
    assert set(body) == {"detail", "error", "message", "error_id"}
    assert body["error"] == "internal_error" and body["error_id"] in body["message"]
    assert "secret" not in r.text and "/srv" not in r.text and "sk-live" not in r.text
    logged = [rec for rec in caplog.records if body["error_id"] in rec.getMessage()]
    assert logged and logged[0].exc_info is not None  # the traceback is in the log


def test_framework_errors_share_the_body_shape() -> None:
    with local_client(app_raising()) as c:
        missing = c.get("/no/such/route")
        wrong_method = c.delete("/bug")
        invalid = c.post("/typed", json={"n": "x"})
        not_json = c.post("/typed", content=b"{", headers={"content-type": "application/json"})
    assert (missing.status_code, missing.json()["error"]) == (404, "not_found")
    assert (wrong_method.status_code, wrong_method.json()["error"]) == (405,
                                                                         "method_not_allowed")
    for r in (invalid, not_json):
        assert r.status_code == 400  # never FastAPI's 422
        body = r.json()
        assert set(body) == {"detail", "error", "message", "errors"}
        assert body["error"] == "invalid_request" and body["detail"].startswith("Invalid")
    assert "'n'" in invalid.json()["message"]
    assert "not valid JSON" in not_json.json()["message"]
    for r in (missing, wrong_method):
        assert set(r.json()) == {"detail", "error", "message"}
