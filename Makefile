# Everything a fresh machine needs is installed from here; see README.md.
#   make serve   lean runtime venv (ragline[local,mcp], no torch) + the cached model
#   make test    the same venv plus test tools and the accuracy-test references
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEVSTAMP := $(VENV)/.installed-dev
HOST ?= 127.0.0.1
PORT ?= 8000
DATA ?= ./data
PYTEST_ARGS ?=

.PHONY: install install-dev serve test test-slow test-journeys test-hostile test-chroma test-fresh-clone test-llm lint typecheck bench bench-chat clean

# The spec 000/002 HTTP scenarios, run again on a ragline whose store is Chroma
# (in-process, and a real `chroma run` server the tests start), and ?service= routing to
# Chroma as a second store.
CHROMA_API_TESTS := tests/api/test_collections.py tests/api/test_documents.py tests/api/test_search.py \
	tests/api/test_service_routing_stores.py

$(BIN)/python:
	@echo "==> creating the virtualenv $(VENV) ($(PY))"
	$(PY) -m venv $(VENV)

$(STAMP): pyproject.toml scripts/install.sh scripts/ensure_model.py scripts/build_onnx_model.py \
		src/ragline/providers/embedders/model_cache.py | $(BIN)/python
	bash scripts/install.sh $(BIN) runtime
	touch $(STAMP)

$(DEVSTAMP): $(STAMP)
	bash scripts/install.sh $(BIN) dev
	touch $(DEVSTAMP)

install: $(STAMP)

install-dev: $(DEVSTAMP)

serve: $(STAMP)
	@echo "==> starting ragline (Ctrl-C stops it)"
	$(BIN)/ragline serve --host $(HOST) --port $(PORT) --data-dir $(DATA)

# The CI command: lint, types and import contracts first (seconds), then the default suite
# (everything but the slow and llm tiers; < 15 min on 2 cores), then the Chroma tier.
test: $(DEVSTAMP) lint
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m pytest -q \
		-m "not llm and not slow and not journey and not hostile" $(PYTEST_ARGS)
	$(MAKE) --no-print-directory test-chroma

# The slow tier (marker "slow"): end-to-end runs against real processes — a fresh clone,
# headless Chromium, SIGKILL chaos, a second ragline server, PostgreSQL workers, the docs'
# examples. CI runs it after `make test`.
test-slow: $(DEVSTAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m pytest -q -m "slow and not llm" \
		$(PYTEST_ARGS)

# The journey tier (marker "journey", tests/journeys): a team's first day on a fresh data
# directory through real processes (server, CLI, two user keys, chat, MCP, console, backup
# and restore); about 3 minutes. CI runs it after the slow tier.
test-journeys: $(DEVSTAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m pytest -q -m journey tests/journeys \
		$(PYTEST_ARGS)

# The hostile tier (marker "hostile", tests/hostile): a real server under attack, bounded
# in count and time (~5 min): half-sent requests, slow bodies, 60 MB bulk writes, a YAML
# alias bomb, webhook replays, a lone-surrogate/NUL sweep of every operation (issue 32).
test-hostile: $(DEVSTAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m pytest -q -m hostile tests/hostile \
		$(PYTEST_ARGS)

test-chroma: $(DEVSTAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m pytest -q \
		--store=chroma,chroma-server $(CHROMA_API_TESTS)

# The real-LLM tier (tests/llm, marker "llm"): llama.cpp's server with SmolLM2-135M, in a
# venv of its own. The llama-cpp-python wheel is compiled once (10-20 min on 2 cores) into
# $(LLM_WHEELS) and reused by every later venv.
LLM_VENV ?= .venv-llm
LLM_WHEELS ?= $(HOME)/.cache/ragline-wheels
LLM_STAMP := $(LLM_VENV)/.installed

$(LLM_STAMP): scripts/install_llm.sh scripts/build_llama_wheel.sh
	RAGLINE_WHEEL_CACHE=$(LLM_WHEELS) PY=$(PY) bash scripts/install_llm.sh $(LLM_VENV)
	touch $(LLM_STAMP)

test-llm: $(DEVSTAMP) $(LLM_STAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 RAGLINE_LLAMA_PYTHON=$(LLM_VENV)/bin/python \
		$(BIN)/python -m pytest -q -m llm tests/llm

bench-chat: $(STAMP) $(LLM_STAMP)
	HF_HUB_OFFLINE=1 RAGLINE_LLAMA_PYTHON=$(LLM_VENV)/bin/python \
		$(BIN)/python benchmarks/bench_chat.py

# A newcomer's first run in a temporary clone (part of `make test-slow`).
test-fresh-clone: $(DEVSTAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m pytest -q tests/test_fresh_clone.py

lint: $(DEVSTAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

bench: $(DEVSTAMP)
	$(BIN)/python benchmarks/bench_store.py

clean:
	rm -rf $(VENV) $(LLM_VENV)
