# Everything a fresh machine needs is installed from here; see README.md.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
DATA ?= ./data

.PHONY: install serve test lint typecheck bench clean

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

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_store.py

clean:
	rm -rf $(VENV)
