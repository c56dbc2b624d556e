# The two commands a newcomer needs (see README):
#   make sweep   - set up .venv and run the bundled example sweep locally
#   make test    - set up .venv and run the test suite (what CI runs)
#   make e2e     - the end-to-end tier: real etcd, kube-apiserver and Katib (built from Go modules,
#                  cached outside the repo by scripts/e2e_build.sh), MariaDB from Debian
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: sweep test test-slow e2e e2e-deps lint bench-ingest venv

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
	$(BIN)/pytest -q -m "not slow and not e2e"

e2e-deps:
	scripts/e2e_deps.sh
	scripts/e2e_build.sh >/dev/null

e2e: $(STAMP) e2e-deps
	$(BIN)/pytest -q -m e2e --durations=30 tests/e2e tests/node

test-slow: $(STAMP)
	$(BIN)/pytest -q -m slow

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/mypy
