# One entry point for set-up, the demo, the tests and the benchmarks.
# `make demo` and `make test` work on a fresh clone: each sets up what it needs first.

VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)

.PHONY: setup system-deps demo test lint bench

setup: system-deps $(STAMP)

system-deps:
	bash scripts/install_system_deps.sh

# torch==2.13.0 first: an unpinned torch pulls a multi-GB CUDA build.
$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[all]"
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

demo: setup
	$(VENV)/bin/agentgym-eppo train --config configs/demo-cpu.yaml

test: setup
	bash scripts/run_tests.sh

lint: setup
	$(VENV)/bin/ruff check agentgym_eppo tests benchmarks
	$(VENV)/bin/ruff format --check agentgym_eppo tests benchmarks
	$(VENV)/bin/mypy
	$(PY) -m pytest -q -p no:randomly -p no:cacheprovider tests/test_layers.py  # the layer contract

bench: setup
	$(PY) -m benchmarks.run
