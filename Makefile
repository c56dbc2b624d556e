# The two commands a newcomer needs (see README):
#   make sweep   - set up .venv and run the bundled example sweep locally
#   make test    - set up .venv and run the test suite (what CI runs)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: sweep test test-slow lint bench-ingest venv

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[dev,gp]"
	touch $(STAMP)

sweep: $(STAMP)
	$(BIN)/katib-progress sweep examples/local/experiment.yaml

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/pytest -q -m "not slow"

test-slow: $(STAMP)
	$(BIN)/pytest -q -m slow

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/mypy
