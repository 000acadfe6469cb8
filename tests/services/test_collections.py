"""Collection lifecycle invariants that HTTP cannot easily provoke: failures and crashes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ragline.facade import Ragline
from ragline.services.corpus.documents import DocumentInput
from ragline.settings import Settings


def rl_at(path: Path) -> Ragline:
    return Ragline(Settings(data_dir=path, _env_file=None)).start()  # type: ignore[call-arg]


def fill(rl: Ragline, name: str, n: int) -> None:
    rl.collections.create(rl.owner(), name, {"keep": True})
    vecs = np.random.default_rng(0).normal(size=(n, 8))
    rl.documents.add(rl.owner(), name, [DocumentInput(f"t{i}", {"i": i}, vecs[i].tolist(),
                                                      f"d{i}") for i in range(n)])


def test_empty_that_fails_midway_deletes_nothing(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    rl = rl_at(tmp_path)
    fill(rl, "c", 50)
    before = set(p.name for p in rl.settings.shards_dir().iterdir())

    def boom(*a: object) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(rl.services.catalog, "swap_shard", boom)
    with pytest.raises(RuntimeError):
        rl.services.collections.empty("c", "default")
    assert rl.services.documents.count("c", "default") == 50
    assert set(p.name for p in rl.settings.shards_dir().iterdir()) == before  # new shard gone
    rl.close()


def test_crash_after_swap_is_finished_at_next_start(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    rl = rl_at(tmp_path)
    fill(rl, "c", 20)
    old = rl.services.collections.get("c").shard
    monkeypatch.setattr(rl.services.collections, "_drop_retired", lambda shard: None)  # "crash"
    assert rl.services.collections.empty("c", "default") == 20
    assert (rl.settings.shards_dir() / old).exists()
    rl.close()
    rl2 = rl_at(tmp_path)
    assert not (rl2.settings.shards_dir() / old).exists()
    assert rl2.services.catalog.retired_shards() == []
    assert rl2.services.documents.count("c", "default") == 0
    assert rl2.services.collections.get("c").metadata == {"keep": True}
    rl2.close()


def test_orphan_shard_from_interrupted_create_is_removed(tmp_path: Path) -> None:
    rl = rl_at(tmp_path)
    rl.services.store.create_shard("deadbeef", 8)  # as if the catalog insert never happened
    rl.close()
    rl2 = rl_at(tmp_path)
    assert not (rl2.settings.shards_dir() / "deadbeef").exists()
    rl2.close()


def test_delete_then_recreate_same_name_starts_empty(tmp_path: Path) -> None:
    rl = rl_at(tmp_path)
    fill(rl, "c", 10)
    rl.collections.delete(rl.owner(), "c")
    assert rl.collections.create(rl.owner(), "c").count == 0
    rl.close()
