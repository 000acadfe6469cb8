"""Configuration errors name the field, never its value (issue 10)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.settings import Settings

KEY = "sk-live-DO-NOT-ECHO-1234567890"


def test_misspelt_embedder_option_does_not_echo_the_api_key(tmp_path: Path) -> None:
    s = Settings(data_dir=tmp_path / "d", _env_file=None,  # type: ignore[call-arg]
                 embedder_options={"openai": {"api_key": KEY, "base_urll": "http://x/v1",
                                              "model": "m"}})
    with TestClient(create_app(s), base_url="http://localhost") as c:
        r = c.post("/collections", json={"name": "docs", "embed": {"provider": "openai"}})
        if r.status_code == 201:  # created lazily: the first write loads the embedder
            r = c.post("/collections/docs/documents", json={"documents": [{"text": "hi"}]})
        assert r.status_code == 400
        assert KEY not in r.text and "base_urll" in r.json()["message"]


def test_wrong_type_for_a_secret_is_named_not_echoed(tmp_path: Path) -> None:
    s = Settings(data_dir=tmp_path / "d", _env_file=None,  # type: ignore[call-arg]
                 embedder_options={"openai": {"api_key": [KEY], "model": "m"}})
    with TestClient(create_app(s), base_url="http://localhost") as c:
        r = c.post("/collections", json={"name": "docs", "embed": {"provider": "openai"}})
        if r.status_code == 201:
            r = c.post("/collections/docs/documents", json={"documents": [{"text": "hi"}]})
        assert r.status_code == 400 and KEY not in r.text and "api_key" in r.text


def test_cli_settings_error_names_the_field_only(tmp_path: Path) -> None:
    env = {"RAGLINE_EMBEDDER_OPTIONS": json.dumps({"openai": {"api_key": KEY}}) + "}",
           "RAGLINE_GITHUB_WEBHOOK_SECRET": KEY, "RAGLINE_PORT": f"not-a-port-{KEY}",
           "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "ragline.cli.main", "serve", "--data-dir",
                           str(tmp_path / "d")], env=env, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode != 0
    out = done.stdout + done.stderr
    assert KEY not in out, out[-2000:]
    assert "Invalid configuration" in out and "embedder_options" in out
    assert "Traceback" not in out
