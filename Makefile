# Everything a fresh machine needs is installed from here; see README.md.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
DATA ?= ./data

.PHONY: install serve test test-llm lint typecheck bench bench-chat clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): pyproject.toml scripts/install.sh | $(BIN)/python
	bash scripts/install.sh $(BIN)
	touch $(STAMP)

install: $(STAMP)

serve: $(STAMP)
	$(BIN)/ragline serve --host $(HOST) --port $(PORT) --data-dir $(DATA)

# The CI command: lint, types and import contracts first (seconds), then the suite.
test: $(STAMP) lint
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m pytest -q

# The real-LLM tier (tests/llm, marker "llm"): llama.cpp's server with SmolLM2-135M, in a
# venv of its own. The llama-cpp-python wheel is compiled once (10-20 min on 2 cores) into
# $(LLM_WHEELS) and reused by every later venv.
LLM_VENV ?= .venv-llm
LLM_WHEELS ?= $(HOME)/.cache/ragline-wheels
LLM_STAMP := $(LLM_VENV)/.installed

$(LLM_STAMP): scripts/install_llm.sh scripts/build_llama_wheel.sh
	RAGLINE_WHEEL_CACHE=$(LLM_WHEELS) PY=$(PY) bash scripts/install_llm.sh $(LLM_VENV)
	touch $(LLM_STAMP)

test-llm: $(STAMP) $(LLM_STAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 RAGLINE_LLAMA_PYTHON=$(LLM_VENV)/bin/python \
		$(BIN)/python -m pytest -q -m llm tests/llm

bench-chat: $(STAMP) $(LLM_STAMP)
	HF_HUB_OFFLINE=1 RAGLINE_LLAMA_PYTHON=$(LLM_VENV)/bin/python \
		$(BIN)/python benchmarks/bench_chat.py

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_store.py

clean:
	rm -rf $(VENV) $(LLM_VENV)
