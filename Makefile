# The README's two commands:
#   make main   set up, reproduce every implemented paper (quick profile), re-run every notebook (refreshing
#               its saved outputs), build and check the docs site; tables, figures and site land in $(OUT)
#   make test   set up, run the notebook tests and the test suite (with or without the dataset mirror)
SHELL := /bin/bash
# Same hash seed everywhere, so notebook outputs (e.g. the order of a set in a message) are reproducible.
export PYTHONHASHSEED := 0
# The lab's mirror of canonical dataset files, when it sits beside the checkout (any folder works: settings.ini).
export KLRLAB_MIRROR ?= $(abspath $(wildcard ../shared/datasets))
PYTHON ?= python3
VENV ?= .venv
OUT ?= out
PROFILE ?= quick
# The notebooks' reproduction cells read and write the same folder as `klrlab repro`, so they reuse its cells.
export KLRLAB_OUT := $(abspath $(OUT))
BIN := $(VENV)/bin
# The install stamp is named by a hash of what the build reads, not by mtimes: nbdev-export rewrites
# pyproject.toml with the same content, which must not trigger a reinstall.
BUILD_HASH := $(shell cat pyproject.toml setup.py $$(find klrlab -name '*.pyx' -o -name '*.pxd' -o -name '*.h' | sort) 2>/dev/null | sha256sum | cut -c1-16)
STAMP := $(VENV)/.klrlab-installed-$(BUILD_HASH)

.PHONY: main test test-mirror setup build repro notebooks docs

main: setup repro notebooks docs

test: setup
	$(BIN)/nbdev-test --n-workers 2
	$(BIN)/python -m pytest -q

# The checks that only a machine with the dataset mirror can make (CI runs them after `make test` without it): the
# notebooks whose cells read mirrored files, and the tests that skip without a mirror.
MIRROR_NOTEBOOKS := ^(02_datasets|90_repro_consolo|91_repro_keerthi|92_repro_frandi|93_repro_zhou|94_repro_ong)\.ipynb$$
test-mirror: setup
	@test -n "$(KLRLAB_MIRROR)" || { echo "test-mirror: set KLRLAB_MIRROR to the dataset mirror folder"; exit 2; }
	$(BIN)/nbdev-test --n-workers 2 --file-re '$(MIRROR_NOTEBOOKS)'
	$(BIN)/python -m pytest -q tests/test_datasets.py tests/repro

setup: $(STAMP)

# Reinstall when the packaging or the compiled sources change.
$(STAMP):
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -U pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	rm -f $(VENV)/.klrlab-installed-*
	touch $@

# Recompile the .pyx files (and the C headers they include) in place after an edit (faster than a reinstall).
build: setup
	$(BIN)/python setup.py -q build_ext --inplace

# The papers' tables and figures, ours beside the published numbers: $(OUT)/<paper>/ (make main PROFILE=paper: full protocols).
repro: setup
	$(BIN)/klrlab repro all --profile $(PROFILE) --out $(OUT)

notebooks: setup
	$(BIN)/nbdev-test --n-workers 2 --save
	$(BIN)/nbdev-clean

docs: setup
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/klrlab docs --out $(OUT)/site
