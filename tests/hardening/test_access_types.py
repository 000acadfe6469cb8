"""Fields whose wrong type would widen access are refused (issue 32, item 9):
``"tenants": "alice"`` (a string, not a list) left a collection readable by every tenant."""

from __future__ import annotations

from typing import Any

import pytest

from ragline.facade import Ragline
from tests.api.helpers import Keyed


def names(w: Keyed, who: str) -> list[str]:
    return [c["name"] for c in w.call(who, "GET", "/collections").json()["collections"]]


@pytest.mark.parametrize("tenants", ["alice", {"alice": True}, [1], ["alice", None], [""], 7])
def test_tenants_must_be_a_list_of_names(keyed: Keyed, tenants: Any) -> None:
    r = keyed.call("admin", "POST", "/collections", {"name": "kb",
                                                     "metadata": {"tenants": tenants}})
    assert r.status_code == 400, r.text
    assert "'tenants' must be a list of tenant names" in r.json()["message"]
    assert names(keyed, "admin") == []  # nothing created
    assert keyed.call("admin", "POST", "/collections", {
        "name": "kb", "metadata": {"tenants": ["alice"]}}).status_code == 201
    for merge in ("false", "true"):
        r = keyed.call("admin", "PUT", f"/collections/kb/metadata?merge={merge}",
                       {"metadata": {"tenants": tenants}})
        assert r.status_code == 400, r.text
    assert names(keyed, "alice") == ["kb"] and names(keyed, "bob") == []


def test_a_string_stored_before_the_check_admits_admins_only(keyed: Keyed) -> None:
    assert keyed.call("admin", "POST", "/collections", {"name": "kb"}).status_code == 201
    rl: Ragline = keyed.c.app.state.ragline  # type: ignore[attr-defined]
    rl.services.collections.catalog.set_metadata("kb", {"tenants": "alice"})  # legacy row
    assert names(keyed, "bob") == [] and names(keyed, "alice") == []
    assert keyed.call("bob", "GET", "/collections/kb").status_code == 404
    assert names(keyed, "admin") == ["kb"]
    # null (or no key) means shared, as before
    r = keyed.call("admin", "PUT", "/collections/kb/metadata", {"metadata": {"tenants": None}})
    assert r.status_code == 200, r.text
    assert names(keyed, "bob") == ["kb"]
