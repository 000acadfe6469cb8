"""``Ragline``: the constructor only wires; ``start()`` recovers; ``close()`` releases."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragline.facade import DocumentInput, Ragline
from ragline.settings import Settings


def settings(path: Path) -> Settings:
    return Settings(data_dir=path, _env_file=None)


def test_constructor_touches_nothing(tmp_path: Path) -> None:
    rl = Ragline(settings(tmp_path / "data"))
    assert not (tmp_path / "data").exists()
    assert not rl.started
    with pytest.raises(RuntimeError, match="not started"):
        rl.collections.all(rl.owner())
    rl.close()  # closing an unstarted facade is a no-op


def test_start_recovers_what_a_crash_left_and_close_releases(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Ragline(settings(data)) as rl:
        me = rl.owner()
        rl.collections.create(me, "c")
        rl.documents.add(me, "c", [DocumentInput("a", {}, [1.0, 0.0], "a")])
        sv = rl.services
        sv.store.create_shard("orphan0000", 2)  # a create interrupted before its catalog write
        job = sv.jobs.table.create(kind="directory", trigger="api", mode="incremental",
                                   collection="c", tenant="default", path=str(tmp_path))
        sv.jobs.table.start(job.id)  # running when the process "died": a dead process
        sv.jobs.table.fail_unfinished = lambda error: []  # never gets to mark it
        (data / "uploads" / "j1").mkdir(parents=True)
        (data / "uploads" / "j1" / "data").write_bytes(b"left behind")
    shards = data / "collections"
    assert (shards / "orphan0000").exists()

    again = Ragline(settings(data))
    assert (shards / "orphan0000").exists() and (data / "uploads").exists()  # not yet
    again.start()
    try:
        me = again.owner()
        assert not (shards / "orphan0000").exists()
        assert not (data / "uploads").exists()
        failed = again.ingestion.job(me, job.id)
        assert (failed.status, failed.error) == ("failed", "interrupted by restart")
        assert [c.count for c in again.collections.all(me)] == [1]
        assert again.start() is again  # idempotent
    finally:
        again.close()
    assert not again.started
    with pytest.raises(RuntimeError):
        again.collections.get(again.owner(), "c")
    again.close()  # twice is fine


def test_provider_options_never_show_in_a_settings_repr(tmp_path: Path) -> None:
    s = Settings(data_dir=tmp_path, _env_file=None,
                 store_options={"dsn": "postgresql://u:hunter2@db/x"},
                 embedder_options={"openai": {"api_key": "sk-live-1"}})
    for text in (repr(s), str(s)):
        assert "hunter2" not in text and "sk-live-1" not in text
        assert "store_options" in text  # the keys are still named
