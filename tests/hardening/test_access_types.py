"""Fields whose wrong type would widen access are refused (issue 32, item 9):
``"tenants": "alice"`` (a string, not a list) left a collection readable by every tenant."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.facade import Ragline
from tests.ingestion_support import fake_settings


class Keys:
    def __init__(self, client: TestClient, keys: dict[str, str]) -> None:
        self.c, self.keys = client, keys

    def call(self, who: str, method: str, url: str, body: Any = None) -> Any:
        return self.c.request(method, url, json=body,
                              headers={"Authorization": f"Bearer {self.keys[who]}"})


@pytest.fixture
def world(tmp_path: Path) -> Iterator[Keys]:
    settings = fake_settings(tmp_path, auth="on")
    with TestClient(create_app(settings), base_url="http://localhost") as c:
        rl: Ragline = c.app.state.ragline  # type: ignore[attr-defined]
        me = rl.owner()
        yield Keys(c, {"admin": rl.keys.create(me, "admin", "default", "ops")[1],
                       "alice": rl.keys.create(me, "user", "alice")[1],
                       "bob": rl.keys.create(me, "user", "bob")[1]})


def names(w: Keys, who: str) -> list[str]:
    return [c["name"] for c in w.call(who, "GET", "/collections").json()["collections"]]


@pytest.mark.parametrize("tenants", ["alice", {"alice": True}, [1], ["alice", None], [""], 7])
def test_tenants_must_be_a_list_of_names(world: Keys, tenants: Any) -> None:
    r = world.call("admin", "POST", "/collections", {"name": "kb",
                                                     "metadata": {"tenants": tenants}})
    assert r.status_code == 400, r.text
    assert "'tenants' must be a list of tenant names" in r.json()["message"]
    assert names(world, "admin") == []  # nothing created
    assert world.call("admin", "POST", "/collections", {
        "name": "kb", "metadata": {"tenants": ["alice"]}}).status_code == 201
    for merge in ("false", "true"):
        r = world.call("admin", "PUT", f"/collections/kb/metadata?merge={merge}",
                       {"metadata": {"tenants": tenants}})
        assert r.status_code == 400, r.text
    assert names(world, "alice") == ["kb"] and names(world, "bob") == []


def test_a_string_stored_before_the_check_admits_admins_only(world: Keys) -> None:
    assert world.call("admin", "POST", "/collections", {"name": "kb"}).status_code == 201
    rl: Ragline = world.c.app.state.ragline  # type: ignore[attr-defined]
    rl.services.collections.catalog.set_metadata("kb", {"tenants": "alice"})  # legacy row
    assert names(world, "bob") == [] and names(world, "alice") == []
    assert world.call("bob", "GET", "/collections/kb").status_code == 404
    assert names(world, "admin") == ["kb"]
    # null (or no key) means shared, as before
    r = world.call("admin", "PUT", "/collections/kb/metadata", {"metadata": {"tenants": None}})
    assert r.status_code == 200, r.text
    assert names(world, "bob") == ["kb"]
