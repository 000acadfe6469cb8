#!/usr/bin/env bash
# Builds the llama-cpp-python wheel ONCE into a cache outside the virtualenv and reuses it.
#
# Why: PyPI has no binary wheel for llama-cpp-python, so every install compiles llama.cpp
# (11-20 minutes on 2 cores). The real-LLM test tier (`make test-llm`) needs its OpenAI-compatible
# server; building into a cache directory means a fresh venv (or `make clean`) does not pay again.
#
# Usage: scripts/build_llama_wheel.sh [WHEEL_DIR]   (default: $RAGLINE_WHEEL_CACHE or
#        ~/.cache/ragline-wheels). Prints the wheel path on the last line.
set -euo pipefail
VERSION="${LLAMA_CPP_VERSION:-0.3.36}"
DIR="${1:-${RAGLINE_WHEEL_CACHE:-$HOME/.cache/ragline-wheels}}"
PY="${PY:-python3}"
mkdir -p "$DIR"

existing=$(ls "$DIR"/llama_cpp_python-"$VERSION"-*.whl 2>/dev/null | head -n1 || true)
if [[ -n "$existing" ]]; then
    echo "$existing"
    exit 0
fi

echo "building llama-cpp-python $VERSION into $DIR (10-20 min; runs niced on one core)" >&2
# LLAVA_BUILD=OFF skips the multimodal library (51 of 193 compile units) we never use.
# One build job and nice 10: the build machine is shared; raise CMAKE_BUILD_PARALLEL_LEVEL
# on a machine of your own.
CMAKE_ARGS="${CMAKE_ARGS:--DLLAVA_BUILD=OFF}" \
CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-1}" \
    nice -n 10 "$PY" -m pip wheel --no-deps -w "$DIR.partial" "llama-cpp-python==$VERSION" >&2
mv "$DIR.partial"/llama_cpp_python-"$VERSION"-*.whl "$DIR"/
rmdir "$DIR.partial" 2>/dev/null || true
ls "$DIR"/llama_cpp_python-"$VERSION"-*.whl | head -n1
