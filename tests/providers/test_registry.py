"""The provider registry: discovery, schemas, validation, allow list, broken plugins, and a
third-party plugin that appears without any change to ragline's code."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.errors import InvalidInput
from ragline.facade import Ragline
from ragline.providers.base import secret_fields
from ragline.providers.registry import KINDS, registry
from tests.ingestion_support import fake_settings

PLUGINS = Path(__file__).resolve().parents[1] / "fixtures" / "plugins"


@pytest.fixture
def acme(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The acme plugin installed: its folder (with a dist-info) on sys.path."""
    monkeypatch.syspath_prepend(str(PLUGINS))
    registry.configure(None)
    registry.reload()
    yield
    monkeypatch.undo()
    registry.configure(None)
    registry.reload()


def test_every_builtin_is_listed_with_a_valid_schema_and_capabilities() -> None:
    listing = registry.describe()
    assert listing["kinds"] == list(KINDS)
    names = {kind: {p["name"] for p in listing[kind]} for kind in KINDS}
    assert {"qdrant-edge", "chroma", "pgvector", "qdrant", "ragline-remote"} <= names["stores"]
    assert {"local", "openai"} <= names["embedders"]
    assert {"cross-encoder", "onnx-cross-encoder"} <= names["rerankers"]
    assert "openai" in names["llms"]
    for kind in ("stores", "embedders", "rerankers", "llms"):
        for entry in listing[kind]:
            jsonschema.Draft202012Validator.check_schema(entry["schema"])
            assert entry["schema"]["type"] == "object", entry["name"]
            assert entry["capabilities"], entry["name"]
            assert entry["kind"] == kind
    assert listing["errors"] == [] and listing["skipped"] == []


@pytest.mark.parametrize(("kind", "name", "secret"), [
    ("embedders", "openai", "api_key"), ("llms", "openai", "api_key"),
    ("stores", "ragline-remote", "api_key"), ("stores", "chroma", "headers"),
])
def test_secrets_are_write_only_in_schemas(kind: str, name: str, secret: str) -> None:
    schema = registry.entry(kind, name)["schema"]
    assert schema["properties"][secret]["writeOnly"] is True
    assert secret in secret_fields(registry.get(kind, name).Config)


def test_invalid_config_names_the_field_never_the_value() -> None:
    with pytest.raises(InvalidInput) as err:
        registry.config("stores", "ragline-remote", {"base_url": "ftp://x",
                                                     "api_key": "sk-SECRET",
                                                     "timeout": -1, "colour": "blue"})
    message = err.value.message
    assert "'base_url'" in message and "'timeout'" in message and "'colour'" in message
    assert "sk-SECRET" not in message and "ftp://x" not in message


def test_unknown_kind_and_name() -> None:
    with pytest.raises(InvalidInput, match=r"available: .*qdrant-edge"):
        registry.get("stores", "nope")
    with pytest.raises(InvalidInput, match="Unknown provider kind"):
        registry.get("widgets", "x")


def test_a_third_party_plugin_appears_without_code_changes(acme: None) -> None:
    listing = registry.describe()
    acme_hash = next(p for p in listing["embedders"] if p["name"] == "acme-hash")
    assert acme_hash["capabilities"] == ["embeddings", "acme"]
    assert acme_hash["schema"]["properties"]["token"]["writeOnly"] is True
    emb = registry.build("embedders", "acme-hash", {"dimension": 8})
    assert emb.embed(["hello world"]).shape == (1, 8)
    # broken plugins are reported, with the reason, and nothing else is affected
    problems = {(e["kind"], e["name"]): e for e in listing["errors"]}
    assert problems[("stores", "acme-broken")]["distribution"] == "acme-ragline"
    assert "ModuleNotFoundError" in problems[("stores", "acme-broken")]["reason"]
    assert "no pydantic 'Config'" in problems[("rerankers", "acme-not-a-provider")]["reason"]
    assert "acme-broken" not in registry.names("stores")
    assert "qdrant-edge" in registry.names("stores")


def test_has_imports_only_the_provider_asked_for_and_refuses_broken_ones(acme: None) -> None:
    assert registry.has("embedders", "acme-hash")
    assert not registry.has("stores", "acme-broken")  # its module is missing
    assert not registry.has("rerankers", "acme-not-a-provider")
    assert not registry.has("stores", "nope") and not registry.has("widgets", "x")
    listing = registry.describe()  # the failures are listed, once each
    assert sorted(e["name"] for e in listing["errors"]) == ["acme-broken",
                                                            "acme-not-a-provider"]


SDKS = ("openai", "qdrant_client", "psycopg", "chromadb")


def test_a_process_that_uses_the_embedded_store_imports_no_other_sdk(tmp_path: Path) -> None:
    """A server or CLI command on the defaults imports neither the SDKs of the other
    stores nor OpenAI's (those imports were most of a server's start-up time), and
    listing the providers still finds every one of them."""
    code = textwrap.dedent(f"""
        import json, sys
        import ragline.cli.main, ragline.api.app
        from ragline.providers.registry import registry
        from ragline.providers.retry import classify
        sdks = {SDKS!r}
        registry.build("stores", "qdrant-edge", {{"path": {str(tmp_path)!r}}})
        assert registry.has("embedders", "local") and registry.has("rerankers", "cross-encoder")
        assert classify(ValueError("x")) is None
        before = [m for m in sdks if m in sys.modules]
        names = {{k: registry.names(k) for k in ("stores", "embedders")}}
        after = [m for m in sdks if m in sys.modules]
        print(json.dumps([before, after, "qdrant" in names["stores"],
                          "openai" in names["embedders"]]))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    before, after, *listed = json.loads(out)
    assert before == [] and listed == [True, True]
    assert {"openai", "qdrant_client", "psycopg"} <= set(after)  # they load when listed


def test_allow_list_keeps_unlisted_plugins_out_but_never_builtins(acme: None) -> None:
    registry.configure(["rerankers:*"])
    try:
        assert "acme-hash" not in registry.names("embedders")
        assert "local" in registry.names("embedders")  # ragline's own always load
        listing = registry.describe()
        assert {(s["kind"], s["name"]) for s in listing["skipped"]} == {
            ("embedders", "acme-hash"), ("stores", "acme-broken")}
        assert [e["name"] for e in listing["errors"]] == ["acme-not-a-provider"]
        registry.configure(["acme-hash"])
        assert "acme-hash" in registry.names("embedders")
        registry.configure(["acme-ragline"])  # the distribution's name allows all of it
        assert "acme-hash" in registry.names("embedders")
        assert len(registry.describe()["errors"]) == 2
    finally:
        registry.configure(None)


def _server(tmp_path: Path, **overrides: Any) -> tuple[TestClient, Ragline]:
    rl = Ragline(fake_settings(tmp_path, auth="off", **overrides))
    return TestClient(create_app(ragline=rl), base_url="http://localhost"), rl


def test_plugin_is_served_and_usable_over_http(acme: None, tmp_path: Path) -> None:
    client, _ = _server(tmp_path)
    with client:
        body = client.get("/api/providers").json()
        assert "acme-hash" in [p["name"] for p in body["embedders"]]
        assert {e["name"] for e in body["errors"]} == {"acme-broken", "acme-not-a-provider"}
        schema = client.get("/api/providers/acme-hash/schema").json()
        assert schema["kind"] == "embedders" and "dimension" in schema["schema"]["properties"]
        r = client.post("/collections", json={"name": "acme", "embed": {"provider": "acme-hash"}})
        assert r.status_code == 201, r.text
        client.post("/collections/acme/documents", json={"documents": [
            {"id": "a", "text": "robots sense the world"},
            {"id": "b", "text": "bread needs yeast"}]})
        hits = client.post("/collections/acme/search",
                           json={"query": "robots world", "limit": 1}).json()["results"]
        assert [h["id"] for h in hits] == ["a"]


def test_providers_allow_setting_applies_at_start(acme: None, tmp_path: Path) -> None:
    client, _ = _server(tmp_path, providers_allow=["stores:*"])
    with client:
        body = client.get("/api/providers").json()
        assert "acme-hash" not in [p["name"] for p in body["embedders"]]
        assert ("embedders", "acme-hash") in {(s["kind"], s["name"]) for s in body["skipped"]}


def test_provider_schema_endpoint(tmp_path: Path) -> None:
    client, _ = _server(tmp_path)
    with client:
        both = client.get("/api/providers/openai/schema").json()
        assert set(both["kinds"]) == {"embedders", "llms"}
        llm = client.get("/api/providers/openai/schema", params={"kind": "llms"}).json()
        assert llm["kind"] == "llms" and llm["kinds"] == ["llms"]
        assert llm["schema"]["properties"]["api_key"]["writeOnly"] is True
        assert "model" in llm["schema"]["properties"]
        missing = client.get("/api/providers/nope/schema")
        assert missing.status_code == 404 and missing.json()["error"] == "provider_not_found"
