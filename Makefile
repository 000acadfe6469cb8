# Everything a fresh machine needs is installed from here; see README.md.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
DATA ?= ./data

.PHONY: install serve test test-chroma lint typecheck bench clean

# The spec 000/002 HTTP scenarios, run again on a ragline whose store is Chroma
# (in-process, and a real `chroma run` server the tests start).
CHROMA_API_TESTS := tests/api/test_collections.py tests/api/test_documents.py tests/api/test_search.py

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
	$(MAKE) --no-print-directory test-chroma

test-chroma: $(STAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m pytest -q \
		--store=chroma,chroma-server $(CHROMA_API_TESTS)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_store.py

clean:
	rm -rf $(VENV)
