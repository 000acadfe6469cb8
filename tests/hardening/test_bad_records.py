"""``ragline verify --repair`` rewrites records the store holds with values no write takes
any more (issue 32): NUL in a record's text, a metadata key or value, metadata nested
deeper than a write takes, all written before requests were checked. Here they are
written straight to the store, behind ragline's back, beside ordinary documents and an
ingested text; ``verify`` reports them, ``verify --repair`` rewrites them (saying what it
did), and afterwards listings and searches answer and nothing else changed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from ragline.api.app import create_app
from ragline.cli.main import app as cli
from ragline.core.types import Record
from ragline.facade import Ragline
from ragline.services.ingestion.record_repair import examine
from tests.api.helpers import local_client
from tests.ingestion_support import fake_settings

pytestmark = pytest.mark.usefixtures("few_payload_indexes")

T = "default"


def nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": "bottom"}
    for i in range(levels - 1):
        value = {f"l{i}": value}
    return value


BAD: dict[str, tuple[str, Any]] = {  # id -> (text, metadata) written straight to the store
    "nul-text": ("gripper\x00 torque calibration", {"kind": "bad"}),
    "nul-meta": ("plain words about wheels", {"kind": "bad", "note": "a\x00b",
                                              "own\x00er": "x"}),
    "deep": ("sensor fusion notes", {"kind": "bad", "d": nested(40),
                                     "pose": {"x": 1, "y": [1, 2]}}),
}


@pytest.fixture(autouse=True)
def fake_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGLINE_DEFAULT_EMBEDDER", "fake")


def verify(data: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, ["verify", "--data-dir", str(data), "--json", *args])


def everything(rl: Ragline) -> dict[str, tuple[str, dict[str, Any], list[float]]]:
    """Every record of the collection: text, metadata and vector by id."""
    info = rl.services.collections.get("docs")
    page = rl.services.store.list_page(info.shard, T, None, 1000, 0)
    ids = [r.id for r in page.records]
    got = rl.services.store.get(info.shard, T, ids, with_vectors=True)
    return {r.id: (r.text, dict(r.metadata), np.asarray(r.embedding).round(6).tolist())
            for r in got}


def test_verify_reports_and_repair_rewrites_records_with_bad_stored_values(
        tmp_path: Path) -> None:
    settings = fake_settings(tmp_path, default_collection="docs")
    data = settings.data_dir
    with local_client(create_app(settings)) as client:
        assert client.post("/collections", json={
            "name": "docs", "embed": {"provider": "fake"}}).status_code == 201
        r = client.post("/collections/docs/documents", json={"documents": [
            {"id": "good-1", "text": "gripper torque calibration guide",
             "metadata": {"kind": "good", "n": 1}},
            {"id": "good-2", "text": "wheel odometry drift", "metadata": {"kind": "good"}}]})
        assert r.status_code == 200, r.text
        r = client.post("/api/rag/ingest/text", json={
            "text": "# Lidar\n\nLidar scans measure distance.", "title": "lidar"})
        assert r.status_code == 201, r.text
        rl: Ragline = client.app.state.ragline  # type: ignore[attr-defined]
        info = rl.services.collections.get("docs")
        assert info.embedding_provider is not None
        emb = rl.services.embedders.get(info.embedding_provider, info.embedding_model)
        texts = [text for text, _ in BAD.values()]
        vectors = emb.embed(texts, "document")
        rl.services.store.upsert(info.shard, [  # behind ragline's back: no request checks
            Record(rid, text, dict(meta), vectors[i], T)
            for i, (rid, (text, meta)) in enumerate(BAD.items())])
        before = everything(rl)
    assert set(BAD) < set(before) and len(before) == len(BAD) + 3

    found = verify(data)
    assert found.exit_code == 1, found.output
    report = json.loads(found.output)
    bad = {f["message"].split("'")[1]: f for f in report["findings"] if f["kind"] == "bad_record"}
    assert set(bad) == set(BAD), report
    assert all(not f["repaired"] and f["collection"] == "docs" and f["tenant"] == T
               for f in bad.values())
    assert "'text' holds a NUL character" in bad["nul-text"]["message"]
    assert "--repair: rewritten: U+FFFD in place of each lone surrogate, NUL dropped" in \
        bad["nul-text"]["message"]
    assert "'metadata.note' holds a NUL character" in bad["nul-meta"]["message"] or \
        "in 'metadata' holds a NUL character" in bad["nul-meta"]["message"]
    assert "metadata field 'd' holds a mapping 40 level(s) deep" in bad["deep"]["message"]
    assert "field 'pose' flattened into 2 field(s)" in bad["deep"]["message"]
    assert [f["kind"] for f in report["findings"]] == ["bad_record"] * 3  # nothing else

    fixed = verify(data, "--repair")
    assert fixed.exit_code == 0, fixed.output
    repaired = json.loads(fixed.output)["findings"]
    assert [(f["kind"], f["repaired"]) for f in repaired] == [("bad_record", True)] * 3
    assert all("--repair" not in f["message"] and "rewritten:" in f["message"]
               for f in repaired)
    table = CliRunner().invoke(cli, ["verify", "--data-dir", str(data)],
                               env={"COLUMNS": "200"})
    assert table.exit_code == 0 and "consistent" in table.output, table.output

    with local_client(create_app(settings)) as client:
        rl = client.app.state.ragline  # type: ignore[attr-defined]
        after = everything(rl)
        # nothing else changed: the other records, their vectors; repaired ones keep theirs
        assert set(after) == set(before)
        for rid in set(before) - set(BAD):
            assert after[rid] == before[rid], rid
        for rid in BAD:
            assert after[rid][2] == before[rid][2], rid
        assert after["nul-text"][0] == "gripper torque calibration"
        assert after["nul-text"][1] == {"kind": "bad"}
        assert after["nul-meta"][1] == {"kind": "bad", "note": "ab", "owner": "x"}
        deep = after["deep"][1]
        assert deep["kind"] == "bad" and deep["pose_x"] == 1 and deep["pose_y"] == [1, 2]
        assert "d" not in deep and "pose" not in deep
        assert all(not isinstance(v, dict) for v in deep.values())
        # listing and search answer, the repaired records among them
        listed = client.get("/collections/docs/documents", params={"limit": 100})
        assert listed.status_code == 200, listed.text
        assert {d["id"] for d in listed.json()["documents"]} == set(before)
        hits = client.post("/collections/docs/search", json={
            "query": "gripper torque calibration", "limit": 10, "mode": "dense"})
        assert hits.status_code == 200, hits.text
        assert "nul-text" in {h["id"] for h in hits.json()["results"]}
        assert client.post("/collections/docs/documents", json={"documents": [
            {"id": d["id"], "text": d["text"], "metadata": d["metadata"]}
            for d in listed.json()["documents"]]}).status_code == 200  # each one writable
    assert verify(data).exit_code == 0


def test_a_record_whose_id_is_the_bad_value_is_removed_and_others_are_rewritten() -> None:
    """Lone surrogates no store in this repository accepts (PyO3, SQLite, PostgreSQL and
    Qdrant's JSON all refuse them), so the decision is shown on the records themselves."""
    vec = np.ones(4, dtype=np.float32)
    gone = examine(Record("id-\ud800", "text", {}, vec, T))
    assert gone is not None and gone.removes
    assert gone.problems == ["its id holds a lone surrogate (U+D800)"]
    key = examine(Record("k", "caf\udce9", {"ti\ud801tle": "x", "tags": ["a", "\udfff"]},
                         vec, T))
    assert key is not None and key.replacement is not None
    assert key.replacement.text == "caf\ufffd"
    assert key.replacement.metadata == {"ti\ufffdtle": "x", "tags": ["a", "\ufffd"]}
    assert key.replacement.id == "k" and key.replacement.embedding is vec
    rows: Any = {"rows": [{"a": 1}, [2]], "ok": [1, "b"]}  # not the type a write takes
    nested_list = examine(Record("n", "t", rows, vec, T))
    assert nested_list is not None and nested_list.replacement is not None
    assert nested_list.replacement.metadata["ok"] == [1, "b"]
    assert all(isinstance(v, str | int | float | bool | list)
               for v in nested_list.replacement.metadata.values())
    assert examine(Record("fine", "text", {"a": 1, "b": [1, "x"], "c": None}, vec, T)) is None
