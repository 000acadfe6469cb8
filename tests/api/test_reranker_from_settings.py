"""The cross-encoder configured in settings is loaded by ``Ragline(settings)`` and by
``create_app(settings)`` alike, whichever way it is configured (spec 000's shorthand,
an exported ONNX model, or the generic ``reranker`` + ``reranker_options``), with no CLI
step in between."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.facade import Ragline
from ragline.settings import Settings
from ragline.testing.cross_encoder import tiny_cross_encoder_dir

DOCS = [{"id": "a", "text": "ROS 2 topics carry messages"},
        {"id": "b", "text": "bread needs yeast"}, {"id": "c", "text": "nodes talk"}]


def _built(tmp: Path) -> Path:
    from ragline.providers.rerankers.onnx_export import build_reranker

    return build_reranker(str(tiny_cross_encoder_dir()), tmp / "models").path


CONFIGS: dict[str, Callable[[Path], tuple[dict[str, Any], str]]] = {
    # name -> (settings, the provider expected to serve it)
    "cross_encoder_path": lambda _t: ({"cross_encoder_path": tiny_cross_encoder_dir()},
                                      "cross-encoder"),
    "cross_encoder_model (exported ONNX)": lambda t: (
        {"cross_encoder_model": str(tiny_cross_encoder_dir()), "models_dir": _built(t).parent},
        "onnx-cross-encoder"),
    "reranker + reranker_options": lambda _t: (
        {"reranker": "cross-encoder",
         "reranker_options": {"model": str(tiny_cross_encoder_dir()), "local_files_only": True}},
        "cross-encoder"),
}


@pytest.mark.parametrize("how", sorted(CONFIGS))
def test_library_and_app_load_the_configured_cross_encoder(how: str, tmp_path: Path) -> None:
    values, provider = CONFIGS[how](tmp_path)
    lib = Settings(_env_file=None, data_dir=tmp_path / "lib", **values)  # type: ignore[call-arg]
    with Ragline(lib) as rl:
        assert rl.services.reranker.current is not None
        assert type(rl.services.reranker.current).name == provider
        ranked = rl.search.rerank(rl.owner(), "how do nodes talk", DOCS, top_k=2)
        assert len(ranked) == 2 and {r["id"] for r in ranked} <= {"a", "b", "c"}
        library_scores = [(r["id"], round(r["score"], 5)) for r in ranked]
        assert rl.admin.health()["cross_encoder"]["status"] == "loaded"
    app_settings = lib.model_copy(update={"data_dir": tmp_path / "app", "auth": "off"})
    with TestClient(create_app(app_settings), base_url="http://localhost") as client:
        health = client.get("/health").json()
        assert health["cross_encoder"]["status"] == "loaded"
        body = client.post("/rerank", json={"query": "how do nodes talk", "documents": DOCS,
                                            "top_k": 2})
        assert body.status_code == 200, body.text
        http_scores = [(r["id"], round(r["score"], 5)) for r in body.json()["reranked"]]
        assert http_scores == library_scores  # the same model, loaded the same way
