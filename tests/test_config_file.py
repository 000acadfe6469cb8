"""Configuration: TOML file < environment < flags, validated once, errors name the key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragline.errors import ConfigError
from ragline.settings import load_settings, masked_dump, setting_sources

TOML = """
hybrid_candidates = 100
port = 9001
log_format = "json"
github_webhook_secret = "s3cret-webhook"

[embedder_options.openai]
base_url = "http://localhost:11434/v1"
api_key = "sk-very-secret"
"""


@pytest.fixture
def cfg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in list(os.environ):
        if key.startswith("RAGLINE_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)  # no stray ./ragline.toml or .env
    path = tmp_path / "conf.toml"
    path.write_text(TOML)
    return path


def test_precedence_flags_over_env_over_file(cfg: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = load_settings(cfg)
    assert (s.hybrid_candidates, s.port, s.log_format) == (100, 9001, "json")
    assert s.config_file == cfg
    assert s.embedder_options["openai"]["base_url"] == "http://localhost:11434/v1"
    monkeypatch.setenv("RAGLINE_HYBRID_CANDIDATES", "200")
    assert load_settings(cfg).hybrid_candidates == 200
    # None = flag not given
    assert load_settings(cfg, hybrid_candidates=300, port=None).hybrid_candidates == 300
    src = setting_sources(load_settings(cfg, port=1234), flags={"port": 1234})
    assert (src["port"], src["hybrid_candidates"], src["log_format"], src["rrf_k"]) == (
        "flag", "env", "file", "default")


def test_discovery_env_then_cwd(cfg: Path, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings().config_file is None
    (tmp_path / "ragline.toml").write_text("hybrid_candidates = 77\n")
    assert load_settings().hybrid_candidates == 77
    monkeypatch.setenv("RAGLINE_CONFIG", str(cfg))
    assert load_settings().hybrid_candidates == 100


def test_errors_name_the_key(cfg: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("hybrid_candidate = 3\n")
    with pytest.raises(ConfigError,
                       match=r"unknown key 'hybrid_candidate' \(did you mean 'hybrid_candidates'"):
        load_settings(bad)
    bad.write_text('hybrid_candidates = "lots"\n')
    with pytest.raises(ConfigError, match=r"invalid setting 'hybrid_candidates'"):
        load_settings(bad)
    bad.write_text("job_workers = 99\n")  # out of range (le=16)
    with pytest.raises(ConfigError, match=r"'job_workers'.*16"):
        load_settings(bad)
    bad.write_text("hybrid_candidates = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(bad)
    with pytest.raises(ConfigError, match=r"'missing\.toml' not found"):
        load_settings(tmp_path / "missing.toml")


def test_masked_dump_hides_secrets(cfg: Path) -> None:
    dumped = json.dumps(masked_dump(load_settings(cfg)))
    assert "s3cret" not in dumped and "sk-very-secret" not in dumped
    assert dumped.count("********") == 2 and "localhost:11434" in dumped


def _cli(*args: str, cwd: Path, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("RAGLINE_")}
    return subprocess.run([sys.executable, "-m", "ragline.cli.main", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60, env={**base, **(env or {})})


def test_config_show_cli(cfg: Path, tmp_path: Path) -> None:
    out = _cli("--config", str(cfg), "config", "show", "--json", cwd=tmp_path,
               env={"RAGLINE_RRF_K": "42"})
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    assert body["settings"]["hybrid_candidates"] == 100
    assert body["sources"]["hybrid_candidates"] == "file"
    assert body["settings"]["rrf_k"] == 42 and body["sources"]["rrf_k"] == "env"
    assert body["settings"]["github_webhook_secret"] == "********"
    assert "sk-very-secret" not in out.stdout and "s3cret" not in out.stdout
    text = _cli("--config", str(cfg), "config", "show", cwd=tmp_path)
    assert "hybrid_candidates" in text.stdout and "# file" in text.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text("port = 'eighty'\n")
    err = _cli("--config", str(bad), "config", "show", cwd=tmp_path)
    assert err.returncode == 2 and "invalid setting 'port'" in err.stderr


def test_provider_options_never_show_dsns_or_url_passwords() -> None:
    """Store/catalog options are plain dicts until the provider's config reads them: a
    DSN, or any URL carrying a password, is masked in `ragline config show` too."""
    settings = load_settings(None, store="pgvector", store_options={
        "dsn": "postgresql://rag:s3cret-pw@db/rag", "pool_size": 4,
        "mirror": "https://user:other-pw@mirror.example/x"})
    dumped = json.dumps(masked_dump(settings))
    assert "s3cret-pw" not in dumped and "other-pw" not in dumped
    assert '"dsn": "********"' in dumped
    assert "https://user:********@mirror.example/x" in dumped
    assert '"pool_size": 4' in dumped


def test_spec_named_variable_is_an_alias_the_ragline_form_winning(
        cfg: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Spec 001 names RAG_RELEVANCE_THRESHOLD (issue 37 item 2): read, shown as coming from
    the environment, and beaten by RAGLINE_RAG_RELEVANCE_THRESHOLD when both are set."""
    monkeypatch.delenv("RAG_RELEVANCE_THRESHOLD", raising=False)
    assert load_settings(cfg).rag_relevance_threshold == 0.75
    monkeypatch.setenv("RAG_RELEVANCE_THRESHOLD", "0.5")
    s = load_settings(cfg)
    assert s.rag_relevance_threshold == 0.5
    assert setting_sources(s)["rag_relevance_threshold"] == "env"
    monkeypatch.setenv("RAGLINE_RAG_RELEVANCE_THRESHOLD", "0.6")
    assert load_settings(cfg).rag_relevance_threshold == 0.6
    assert load_settings(cfg, rag_relevance_threshold=0.3).rag_relevance_threshold == 0.3
    monkeypatch.setenv("RAG_RELEVANCE_THRESHOLD", "2")
    monkeypatch.delenv("RAGLINE_RAG_RELEVANCE_THRESHOLD")
    with pytest.raises(ConfigError, match=r"RAG_RELEVANCE_THRESHOLD"):
        load_settings(cfg)
