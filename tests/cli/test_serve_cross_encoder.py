"""`ragline serve` / `python server.py`: cross-encoder discovery, loading priority, fatal exit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from ragline.cli.main import app
from ragline.testing.cross_encoder import tiny_cross_encoder_dir
from tests.live_server import LiveServer

ROOT = Path(__file__).resolve().parents[2]


def test_help_shows_cross_encoder_examples() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "server.py"), "--help"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0
    text = " ".join(out.stdout.split())
    assert "--cross-encoder" in text and "--list-reranker-models" in text
    for name in ("ms-marco-TinyBERT-L-2-v2", "ms-marco-MiniLM-L-6-v2", "bge-reranker"):
        assert name in text


def test_list_reranker_models_prints_grouped_list_and_exits() -> None:
    res = CliRunner().invoke(app, ["serve", "--list-reranker-models"])
    assert res.exit_code == 0
    out = res.output.lower()
    assert out.index("fast (") < out.index("recommended (") < out.index("high accuracy (")
    assert "huggingface.co" in out and "any" in out


def test_bad_model_path_is_fatal_before_serving(tmp_path: Path) -> None:
    port_file = tmp_path / "x"
    out = subprocess.run(
        [sys.executable, "-m", "ragline.cli.main", "serve", "--data-dir", str(tmp_path / "d"),
         "--cross-encoder-path", str(port_file / "missing")],
        capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "start-up failed" in out.stderr and "missing" in out.stderr


@pytest.fixture(scope="module")
def model_dir() -> Path:
    return tiny_cross_encoder_dir()


def test_path_flag_loads_model_and_health_reports_it(tmp_path: Path, model_dir: Path) -> None:
    srv = LiveServer(tmp_path / "d", "--cross-encoder-path", str(model_dir),
                     "--cross-encoder", "no/such-model")  # the path wins over the name
    try:
        srv.wait_ready(120)
        health = httpx.get(f"{srv.url}/health").json()
        assert health["cross_encoder"] == {"model": str(model_dir), "status": "loaded"}
        r = httpx.post(f"{srv.url}/rerank", json={"query": "q", "top_k": 1, "documents": [
            {"id": "a", "text": "alpha"}, {"id": "b", "text": "beta"}]})
        assert r.status_code == 200 and len(r.json()["reranked"]) == 1
    finally:
        srv.stop()


def test_env_variable_loads_model(tmp_path: Path, model_dir: Path) -> None:
    srv = LiveServer(tmp_path / "d", env={"CROSS_ENCODER_MODEL": str(model_dir)})
    try:
        srv.wait_ready(120)
        assert httpx.get(f"{srv.url}/health").json()["cross_encoder"]["status"] == "loaded"
    finally:
        srv.stop()


def test_without_model_health_has_no_field_and_rerank_is_503(tmp_path: Path) -> None:
    srv = LiveServer(tmp_path / "d", "--log-level", "info",
                     env={"CROSS_ENCODER_MODEL": "", "CROSS_ENCODER_PATH": ""})
    try:
        srv.wait_ready(120)
        assert "cross_encoder" not in httpx.get(f"{srv.url}/health").json()
        r = httpx.post(f"{srv.url}/rerank", json={"query": "q", "documents": [
            {"id": "a", "text": "x"}]})
        assert r.status_code == 503
        assert r.json()["detail"] == ("Cross-encoder not loaded. Start server with "
                                      "--cross-encoder flag.")
    finally:
        srv.stop()
    log = srv.log.read_text()
    assert "disabled" in log.lower() and "--list-reranker-models" in log
