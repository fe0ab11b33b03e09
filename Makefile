# Every target creates (or reuses) the local virtualenv, so a fresh clone needs nothing else.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.DEFAULT_GOAL := help
.PHONY: help serve test test-fast check fmt bench docs install clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

## help: list the targets
help:
	@grep -E '^## ' $(MAKEFILE_LIST) | sed 's/^## /  make /; s/: /\t/'

## install: create .venv and install the project with its dev tools
install: $(STAMP)

## serve: run the server on SQLite under ./var at http://127.0.0.1:8000
serve: $(STAMP)
	$(BIN)/ai-memory serve

# The suite keeps its SQLite test database and generated key in a temporary data dir
# (AI_MEMORY_DATA_DIR, when given, wins), never in the ./var that `make serve` uses.
TEST_IN_TMP = tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	AI_MEMORY_DATA_DIR="$${AI_MEMORY_DATA_DIR:-$$tmp}"

## test: the whole test suite (SQLite by default; set DATABASE_URL for PostgreSQL)
test: $(STAMP)
	$(TEST_IN_TMP) $(BIN)/pytest

## test-fast: the inner loop: every test not marked slow (no spawned servers, no thread storms)
test-fast: $(STAMP)
	$(TEST_IN_TMP) $(BIN)/pytest -m 'not slow'

## check: lint, format check, types, import layers and missing migrations
check: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy .
	$(BIN)/lint-imports
	$(BIN)/python manage.py makemigrations --check --dry-run

## fmt: fix what ruff can fix and format the code
fmt: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

## bench: measure and write docs/benchmarks.md (not part of CI)
bench: $(STAMP)
	$(BIN)/python -m bench.run
	$(BIN)/python -m bench.notifications
	$(BIN)/python -m bench.search
	$(BIN)/python -m bench.agent_wake

## docs: write the generated tables of docs/reference.md from the code
docs: $(STAMP)
	$(BIN)/python -m tools.docs

## clean: remove the virtualenv, data and caches
clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache
