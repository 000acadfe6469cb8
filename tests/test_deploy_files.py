"""deploy/ is an example people copy: it must stay true to the code.

No container runtime runs here, so the files are checked against what they are read by:
the Compose file against the Compose specification's JSON Schema, the Kubernetes
manifests against the Kubernetes API schemas (``kubernetes-validate``), every ragline
command line against the CLI's own parser, every ``RAGLINE_*`` variable against
``Settings`` (a misspelt name would be ignored silently by pydantic-settings), and the
Dockerfile's extras and scripts against pyproject.toml and the tree. The scaled-out
topology itself runs for real in tests/e2e/test_scaled_out.py.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import tomllib
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import typer.core
import typer.main
import yaml

from ragline.cli.main import app
from ragline.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
# put there by scripts/install.sh (dev): the docker-compose wheel carries the spec's schema
COMPOSE_WHEEL_DIR = Path.home() / ".cache" / "ragline-test"
COMPOSE_SCHEMA_MEMBER = "compose/config/compose_spec.json"
K8S_VERSION = "1.30.0"
PASSWORD = "s3cret-pw"


def _compose_schema() -> dict[str, Any]:
    wheels = sorted(COMPOSE_WHEEL_DIR.glob("docker_compose-*.whl"))
    assert wheels, ("the Compose schema is missing: `make install-dev` downloads it "
                    f"(scripts/install.sh) into {COMPOSE_WHEEL_DIR}")
    with zipfile.ZipFile(wheels[-1]) as wheel:
        schema: dict[str, Any] = json.loads(wheel.read(COMPOSE_SCHEMA_MEMBER))
    return schema


def _interpolate(text: str, env: Mapping[str, str]) -> str:
    """Compose's ``${VAR}``, ``${VAR:-default}`` and ``${VAR:?error}``."""
    def one(m: re.Match[str]) -> str:
        name, op, arg = m.group(1), m.group(2), m.group(3) or ""
        if name in env:
            return env[name]
        assert op != ":?", f"${{{name}}} must be set: {arg}"
        return arg if op == ":-" else ""
    return re.sub(r"\$\{(\w+)(?:(:[-?])([^}]*))?\}", one, text)


def _compose() -> dict[str, Any]:
    text = (DEPLOY / "docker-compose.yml").read_text()
    doc: dict[str, Any] = yaml.safe_load(_interpolate(text, {"RAGLINE_PG_PASSWORD": PASSWORD}))
    return doc


def _k8s_docs() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / "kubernetes" / "ragline.yaml").read_text())
            if d]


def _systemd_env() -> dict[str, str]:
    env = {}
    for line in (DEPLOY / "systemd" / "ragline.env.example").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, value = line.partition("=")
            env[name.strip()] = value
    return env


def _k8s_env(container: Mapping[str, Any], docs: list[dict[str, Any]]) -> dict[str, str]:
    """What a pod's container sees: its ConfigMaps, then its env (Secret refs resolved)."""
    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        env.update(by_kind[("ConfigMap", source["configMapRef"]["name"])]["data"])
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = var["value"]
        else:
            ref = var["valueFrom"]["secretKeyRef"]
            env[var["name"]] = by_kind[("Secret", ref["name"])]["stringData"][ref["key"]]
    return env


def _k8s_containers(docs: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for doc in docs:
        if doc["kind"] == "Deployment":
            yield from doc["spec"]["template"]["spec"]["containers"]


def _ragline_commands() -> list[tuple[str, list[str]]]:
    """Every ragline command line in deploy/, as (where, argv after 'ragline')."""
    found: list[tuple[str, list[str]]] = []
    for name, service in _compose()["services"].items():
        if "command" in service:
            found.append((f"compose {name}", service["command"]))
    for container in _k8s_containers(_k8s_docs()):
        found.append((f"kubernetes {container['name']}", container["args"]))
    for unit in sorted((DEPLOY / "systemd").glob("*.service")):
        exec_start = re.search(r"^ExecStart=(.+)$", unit.read_text(), re.M)
        assert exec_start, unit.name
        argv = shlex.split(exec_start.group(1))
        found.append((f"systemd {unit.name}", [Path(argv[0]).name, *argv[1:]]))
    cmd = re.search(r"^CMD (\[.*\])$", (DEPLOY / "Dockerfile").read_text(), re.M)
    assert cmd
    found.append(("Dockerfile CMD", json.loads(cmd.group(1))))
    assert all(argv[0] == "ragline" for _, argv in found), found
    return [(where, argv[1:]) for where, argv in found]


def _settings_from(env: Mapping[str, str], monkeypatch: pytest.MonkeyPatch,
                   tmp_path: Path) -> Settings:
    known = {f"RAGLINE_{name.upper()}" for name in Settings.model_fields}
    unknown = sorted(k for k in env if k.startswith("RAGLINE_") and k not in known)
    assert not unknown, f"not ragline settings (silently ignored): {unknown}"
    monkeypatch.chdir(tmp_path)  # no .env of this checkout
    for name in list(os.environ):
        if name.startswith("RAGLINE_"):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings()


def test_compose_file_follows_the_compose_specification() -> None:
    doc = _compose()
    jsonschema.validate(doc, _compose_schema())
    # the parts the topology relies on
    assert doc["services"]["worker"]["depends_on"]["api"]["condition"] == "service_healthy"
    assert doc["services"]["api"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "healthcheck" in doc["services"]["api"]


def test_compose_schema_check_catches_a_broken_file() -> None:
    doc = _compose()
    doc["services"]["api"]["depends_on"] = {"postgres": {"condition": "whenever"}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, _compose_schema())


def test_kubernetes_manifests_validate_against_the_api_schemas() -> None:
    docs = _k8s_docs()
    assert {d["kind"] for d in docs} == {"Secret", "ConfigMap", "Deployment", "Service"}
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    broken = json.loads(json.dumps(next(d for d in docs if d["kind"] == "Deployment")))
    broken["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def test_every_ragline_command_line_parses() -> None:
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    seen = set()
    for where, args in _ragline_commands():
        ctx = group.make_context("ragline", list(args), resilient_parsing=False)
        name, sub, rest = group.resolve_command(ctx, list(args))
        assert sub is not None and name is not None, where
        sub.make_context(name, rest, parent=ctx)  # raises on an unknown option or bad value
        seen.add(name)
    assert seen == {"serve", "worker"}


@pytest.mark.parametrize("where", ["compose api", "compose worker", "kubernetes api",
                                   "kubernetes worker", "systemd"])
def test_every_environment_is_a_valid_scaled_out_configuration(
        where: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if where.startswith("compose"):
        service = _compose()["services"][where.split()[1]]
        env = {k: str(v) for k, v in service["environment"].items()}
    elif where.startswith("kubernetes"):
        docs = _k8s_docs()
        env = _k8s_env(next(c for c in _k8s_containers(docs) if c["name"] == where.split()[1]),
                       docs)
    else:
        env = _systemd_env()
    settings = _settings_from(env, monkeypatch, tmp_path)
    assert settings.catalog == "postgres"
    assert settings.store == "pgvector"
    dsn = settings.catalog_options.dsn
    assert dsn is not None and dsn.get_secret_value().startswith("postgresql://ragline:")
    assert str(settings.store_options["dsn"]).startswith("postgresql://ragline:")
    if where == "compose api":
        assert settings.auth == "on"


def test_an_unknown_setting_name_is_caught(monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="RAGLINE_STOER"):
        _settings_from({"RAGLINE_STOER": "pgvector"}, monkeypatch, tmp_path)


def test_the_dockerfile_installs_extras_and_scripts_that_exist() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    installs = re.findall(r'pip install [^\n]*"\.\[([\w,]+)\]"', text)
    assert installs, "the Dockerfile no longer installs ragline with extras"
    for group in installs:
        for extra in group.split(","):
            assert extra in extras, f"the Dockerfile installs a missing extra: {extra}"
    # the scaled-out image needs the PostgreSQL catalog/store drivers
    assert "postgres" in installs[0].split(",")
    for script in re.findall(r"python (scripts/\S+)", text):
        assert (ROOT / script).is_file(), script
