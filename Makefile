# DeepSWE, reproduced. Every target takes PROFILE=tiny|deepswe-32b and writes under runs/.
# `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PROFILE ?= tiny
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SUBPROJECTS := data environments evaluation verifiers training
INSTALLED := $(VENV)/.installed
# CPU machines pin torch to the CPU wheel; set CONSTRAINTS= on a GPU machine.
CONSTRAINTS ?= $(if $(shell command -v nvidia-smi 2>/dev/null),,-c infra/constraints-cpu.txt)

.PHONY: help setup engine base-images test test-fast lint format clean \
        data data-synth images train eval eval-tts reproduce publish bench

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

# --- setup -----------------------------------------------------------------------------------
$(INSTALLED): $(foreach s,$(SUBPROJECTS),$(s)/pyproject.toml) infra/constraints-cpu.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
	  || { echo "setup: Python >= 3.10 is required ($(PYTHON) is $$($(PYTHON) -V))"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -qq --upgrade pip
	$(BIN)/pip install -qq $(CONSTRAINTS) $(foreach s,$(SUBPROJECTS),-e './$(s)[dev]')
	@touch $@
	@echo "setup: installed $(SUBPROJECTS) into $(VENV)"

engine:  ## make sure a Docker engine answers (installs docker.io as root on Debian/Ubuntu)
	@bash infra/docker/ensure-engine.sh

base-images: $(INSTALLED) engine  ## build the registry-free base images (no-op when present)
	@$(BIN)/deepswe-env images base

setup: $(INSTALLED) engine base-images  ## venv + editable installs + Docker engine + base images

# --- checks ----------------------------------------------------------------------------------
test: setup  ## run every test but the gpu ones (docker tests included)
	$(BIN)/pytest -m 'not gpu' $(PYTEST_ARGS)

test-fast: $(INSTALLED)  ## unit tests only: no Docker, no slow ones
	$(BIN)/pytest -m 'not gpu and not docker and not slow' $(PYTEST_ARGS)

lint: $(INSTALLED)  ## ruff check + ruff format --check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(INSTALLED)  ## apply ruff's fixes and formatting
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:  ## remove the venv, caches and build outputs (runs/ is kept)
	rm -rf $(VENV) .pytest_cache .ruff_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
	find . -name '*.egg-info' -type d -prune -exec rm -rf {} +

# --- jobs not built yet: each says what is missing and fails ---------------------------------
define missing
	@echo "make $@: not built yet: $(1)" >&2; exit 2
endef

data:  ## fetch and check the pinned swe-mini sources
	$(call missing,swe-mini sources (issue: swe-mini))
data-synth:  ## regenerate data/swe-mini/tasks.jsonl from the seed
	$(call missing,swe-mini synthesis (issue: swe-mini))
images:  ## build every task image of the profile
	$(call missing,task images of the profile's dataset (issues: spine, swe-mini))
train:  ## GRPO++ training for PROFILE
	$(call missing,GRPO++ trainer (issue: GRPO++ training))
eval:  ## evaluate a policy for PROFILE
	$(call missing,evaluation harness (issue: evaluation harness))
eval-tts:  ## hybrid test-time scaling for PROFILE
	$(call missing,verifiers and hybrid selection)
reproduce:  ## the main job: data, images, train, eval, eval-tts for PROFILE
	$(call missing,the pipeline's stages (data, images, train, eval, eval-tts) are not built yet)
publish:  ## push checkpoints, logs and trajectories to the Hugging Face Hub
	$(call missing,hub publishing)
bench: $(INSTALLED)  ## run the benchmarks in bench/
	@ls bench/*.py >/dev/null 2>&1 || { echo "make bench: not built yet: no benchmark in bench/" >&2; exit 2; }
	@for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done
