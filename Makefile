# The two commands a newcomer needs (see README):
#   make sweep   - set up .venv and run the bundled example sweep locally
#   make test    - set up .venv and run the test suite (what CI runs)
#   make e2e     - the end-to-end tier: real etcd, kube-apiserver and Katib (built from Go modules,
#                  cached outside the repo by scripts/e2e_build.sh), MariaDB from Debian
#   make images  - build the container images with podman (or docker) and print their sizes
#                  (scripts/images.sh; IMAGE_REGISTRY, IMAGE_TAG, IMAGES, IMAGES_BASE=local)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: sweep test test-slow e2e e2e-deps lint bench-ingest venv images

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[all,dev,gp]"
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

# Make variables of these names reach the script through the environment (make exports command-line
# variables); the defaults live in scripts/images.sh.
images:
	scripts/images.sh

test-slow: $(STAMP)
	$(BIN)/pytest -q -m slow

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/mypy
