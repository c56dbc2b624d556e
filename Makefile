# The two commands a newcomer needs (see README):
#   make sweep   - set up .venv with what the sweep needs only, and run the bundled example sweep locally
#   make test    - add the test, lint and docs tools (and torch, transformers) to .venv and run the
#                  test suite, the linters, the docs build and the release workflow's linter (what CI runs)
#   make e2e     - the end-to-end tier: real etcd, kube-apiserver and Katib (built from Go modules,
#                  cached outside the repo by scripts/e2e_build.sh), MariaDB from Debian
#   make images  - build the container images with podman (or docker) and print their sizes
#                  (scripts/images.sh; IMAGE_REGISTRY, IMAGE_TAG, IMAGES, IMAGES_BASE=local)
#   make docs    - build the docs site into site/ (mkdocs, Material theme)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# Two stamps: the sweep's install (`.[sweep]`: no torch, transformers, mypy, ruff) and the full one.
SWEEP_STAMP := $(VENV)/.installed-sweep
STAMP       := $(VENV)/.installed
# Tools that are not Python packages, cached outside the repository.
TOOLS ?= $(HOME)/.cache/katib-progress-tools
ACTIONLINT_VERSION := v1.7.12
ACTIONLINT := $(TOOLS)/actionlint-$(ACTIONLINT_VERSION)

.PHONY: sweep test test-slow e2e e2e-deps lint docs docs-check actionlint bench-ingest venv images example-images

venv: $(STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(SWEEP_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --disable-pip-version-check -e ".[sweep]"
	touch $(SWEEP_STAMP)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[dev,gp]"
	touch $(STAMP) $(SWEEP_STAMP)

sweep: $(SWEEP_STAMP)
	$(BIN)/katib-progress sweep examples/local/experiment.yaml

test: $(STAMP) actionlint
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(MAKE) --no-print-directory docs-check
	$(ACTIONLINT) .github/workflows/*.yml
	$(BIN)/pytest -q -m "not slow and not e2e"

# `mkdocs build --strict`: a broken link, a page missing from the nav or a stale CLI reference fails.
# Built into a temporary directory, so a check leaves nothing behind.
docs-check: $(STAMP)
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir "$$tmp/site"

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

actionlint: $(ACTIONLINT)

$(ACTIONLINT):
	mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) go install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)
	mv $(TOOLS)/actionlint $(ACTIONLINT)

e2e-deps:
	scripts/e2e_deps.sh
	scripts/e2e_build.sh >/dev/null

e2e: $(STAMP) e2e-deps
	$(BIN)/pytest -q -m e2e --durations=30 tests/e2e tests/node

# Make variables of these names reach the script through the environment (make exports command-line
# variables); the defaults live in scripts/images.sh.
images:
	scripts/images.sh

# The cluster examples' training image (examples/cluster/custom-loop), as make images builds it.
example-images:
	IMAGES=example-custom-loop scripts/images.sh

test-slow: $(STAMP)
	$(BIN)/pytest -q -m slow

lint: $(STAMP) actionlint
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/mypy && $(ACTIONLINT) .github/workflows/*.yml
