# DeepSWE, reproduced. Every target takes PROFILE=tiny|deepswe-32b and writes under runs/.
# `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PROFILE ?= tiny
PYTHON ?= python3
# Debian suites `make setup` debootstraps (deepswe-env images base --suite): all, bookworm, bullseye.
BASE_SUITE ?= all
VENV := .venv
BIN := $(VENV)/bin
SUBPROJECTS := data environments evaluation verifiers training reproduce
INSTALLED := $(VENV)/.installed
# CPU machines pin torch to the CPU wheel; set CONSTRAINTS= on a GPU machine.
CONSTRAINTS ?= $(if $(shell command -v nvidia-smi 2>/dev/null),,-c infra/constraints-cpu.txt)

.PHONY: help setup engine browser base-images test test-fast lint format clean \
        data data-synth images train eval eval-tts tts-endpoints vllm reproduce publish bench \
        trl-openenv

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

browser:  ## make sure a Chromium answers for the viewer's browser test (Debian's chromium as root)
	@bash infra/browser/ensure-chromium.sh

base-images: $(INSTALLED) engine  ## build the registry-free base images (no-op when present; BASE_SUITE=bookworm for one)
	@$(BIN)/deepswe-env images base --suite $(BASE_SUITE)

setup: $(INSTALLED) engine base-images  ## venv + editable installs + Docker engine + base images

# --- checks ----------------------------------------------------------------------------------
# Two workers (conftest.py says how files are shared out); PYTEST_WORKERS=0 runs in one process.
PYTEST_WORKERS ?= 2
test: setup browser  ## every test but the gpu and live-cluster ones (docker and browser tests included)
	$(BIN)/pytest -m 'not gpu and not k8s_live' -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

test-fast: $(INSTALLED)  ## unit tests only: no Docker, no slow ones
	$(BIN)/pytest -m 'not gpu and not k8s_live and not docker and not slow' $(PYTEST_ARGS)

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

# --- the jobs -----------------------------------------------------------------------------------
# tiny: swe-mini (committed tasks, sources rebuilt from pinned PyPI sdists), a tiny Qwen3 made
# here, CPU training. deepswe-32b: R2E-Gym (train) and SWE-Bench-Verified (eval) from the Hub,
# a GPU cluster. Every job writes under runs/ and says where.
define missing
	@echo "make $@: not built yet: $(1)" >&2; exit 2
endef
define tiny_only
	@[ "$(PROFILE)" = tiny ] || { echo "make $@: $(1)" >&2; exit 2; }
endef

TINY_MODEL := runs/models/tiny-qwen3
TINY_SFT := runs/models/tiny-qwen3-sft
EVAL_OUT ?= runs/eval-$(PROFILE)
BASE_URL ?=
REPO_MIRROR ?=
# Where `make data PROFILE=deepswe-32b` writes the training tasks: the path that
# configs/deepswe-32b.yaml's data.path reads (a test keeps the two equal).
R2E_TASKS := runs/data/r2e-gym-subset-decontaminated.jsonl

data: $(INSTALLED)  ## the profile's tasks (tiny: swe-toy made, swe-mini's pinned sdists fetched)
ifeq ($(PROFILE),tiny)
	$(BIN)/deepswe-data swe-toy --out runs/data/swe-toy
	$(BIN)/deepswe-data swe-mini fetch
else
	$(BIN)/deepswe-data decontaminate r2e-gym-subset --to $(R2E_TASKS)
	@echo "make data: training tasks in $(R2E_TASKS)"
	$(BIN)/deepswe-eval images --dataset $(R2E_TASKS) $(if $(REPO_MIRROR),--repo-mirror $(REPO_MIRROR))
endif
	@test -f $(dir $(TRAIN_TASKS))health.json && echo "make data: $(dir $(TRAIN_TASKS))health.json says which tasks training leaves out" \
	  || echo "make data: no health manifest beside $(TRAIN_TASKS): training keeps every task; make health PROFILE=$(PROFILE) measures one"

# The training tasks' health (deepswe-eval health): gold 3 times, the empty patch, a need for the
# network, per task. health.json lands beside the task file, where training reads it (data.health).
TRAIN_TASKS = $(if $(filter tiny,$(PROFILE)),runs/data/swe-toy/train.jsonl,$(R2E_TASKS))
health: setup data  ## measure the training tasks' health into health.json beside them; training leaves the unhealthy out (resumable)
	$(BIN)/deepswe-eval health --config configs/$(PROFILE).yaml --dataset $(TRAIN_TASKS) --out $(dir $(TRAIN_TASKS)) \
	  $(if $(REPO_MIRROR),--repo-mirror $(REPO_MIRROR))

data-synth: $(INSTALLED)  ## regenerate data/swe-mini/tasks.jsonl from the seed (tiny only; resumable)
	$(call tiny_only,the deepswe-32b profile uses R2E-Gym and SWE-Bench-Verified as published)
	$(BIN)/deepswe-data swe-mini synth --seed 0 --out data/swe-mini/tasks.jsonl

images: setup data  ## build every task image of the profile
ifeq ($(PROFILE),tiny)
	$(BIN)/deepswe-env build --tasks runs/data/swe-toy/train.jsonl
	$(BIN)/deepswe-env build --tasks runs/data/swe-toy/test.jsonl
	$(BIN)/deepswe-env build --tasks swe-mini
else
	@echo "make images: deepswe-32b uses R2E-Gym's and SWE-bench's images when the engine has them, else builds each from source when first used (REPO_MIRROR=DIR; deepswe-eval images --dataset $(R2E_TASKS) --repo-mirror DIR says which)" >&2; exit 2
endif

$(TINY_MODEL): | $(INSTALLED)
	$(BIN)/deepswe-train init-model --out $@

# The tiny model has no pretraining: an SFT warm start on scripted right and wrong fixes of the
# swe-toy train tasks stands in for it (training/README.md). SFT_EPOCHS=N edits sft.epochs.
SFT_EPOCHS ?=
$(TINY_SFT): | $(TINY_MODEL)
	$(BIN)/deepswe-train sft --config configs/tiny.yaml --out $@ model.path=$(TINY_MODEL) $(if $(SFT_EPOCHS),sft.epochs=$(SFT_EPOCHS))

train: setup $(if $(filter tiny,$(PROFILE)),images $(TINY_SFT))  ## GRPO++ training (RESUME=1 continues; OVERRIDES='a.b=v ...')
	$(BIN)/deepswe-train train --config configs/$(PROFILE).yaml --out runs/train-$(PROFILE) \
	  $(if $(filter tiny,$(PROFILE)),model.path=$(TINY_SFT)) $(if $(REPO_MIRROR),data.repo_mirror=$(REPO_MIRROR)) \
	  $(if $(RESUME),--resume) $(OVERRIDES)
	@echo "make train: run in runs/train-$(PROFILE) (metrics.jsonl, checkpoints/, final/)"

# TRL's GRPOTrainer on swe-toy through our OpenEnv server (deepswe-eval serve, started by the
# example): the tiny SFT start when it exists, else the tiny model (evaluation/README.md).
trl-openenv: setup data $(TINY_MODEL)  ## TRL's GRPOTrainer, a few GRPO steps on swe-toy through deepswe-eval serve (tiny only)
	$(call tiny_only,the example runs the tiny model on CPU)
	$(BIN)/python examples/trl_openenv/train_grpo.py --out runs/trl-openenv --tasks runs/data/swe-toy/train.jsonl

# The evaluation protocol is the profile's eval: section; EVAL_OVERRIDES='eval.a.b=v ...' edits it.
eval: setup  ## evaluate for PROFILE (tiny: gold/empty baselines, then the trained model on swe-mini:test)
ifeq ($(PROFILE),tiny)
	$(BIN)/deepswe-eval validate --config configs/tiny.yaml --out $(EVAL_OUT)/baselines $(EVAL_OVERRIDES)
	@test -d runs/train-tiny/final || { echo "make eval: no trained model at runs/train-tiny/final (run make train); baselines are in $(EVAL_OUT)/baselines" >&2; exit 2; }
	$(BIN)/deepswe-eval run --config configs/tiny.yaml --out $(EVAL_OUT)/model $(EVAL_OVERRIDES)
	@echo "make eval: reports in $(EVAL_OUT)/baselines/{gold,empty}/report.md and $(EVAL_OUT)/model/report.md"
else
	@[ -n "$(BASE_URL)" ] || { echo "make eval: set BASE_URL=http://HOST:PORT/v1 of a vLLM server (see evaluation/README.md)" >&2; exit 2; }
	$(BIN)/deepswe-eval run --config configs/$(PROFILE).yaml --out $(EVAL_OUT) eval.policy.base_url=$(BASE_URL) \
	  $(if $(REPO_MIRROR),eval.repo_mirror=$(REPO_MIRROR)) $(EVAL_OVERRIDES)
	@echo "make eval: report in $(EVAL_OUT)/report.md"
endif

# Test-time scaling: the profile's tts: section (deepswe-reproduce tts; reproduce/README.md). tiny:
# graded candidates (scripted right/wrong fixes, the trained model's episodes when
# runs/train-tiny/final exists), a LoRA judge trained on swe-mini:train episodes, EB verdicts,
# Best@k. deepswe-32b: the policy and the judge (a LoRA on vLLM) served. TTS_OVERRIDES='tts.a=v ...'
JUDGE_URL ?=
TTS_OUT ?= runs/tts-$(PROFILE)
tts-endpoints:
ifneq ($(PROFILE),tiny)
	@[ -n "$(BASE_URL)" ] && [ -n "$(JUDGE_URL)" ] || { echo "make eval-tts: set BASE_URL=http://HOST:PORT/v1 (the policy's vLLM server) and JUDGE_URL=http://HOST:PORT/v1 (vLLM serving the judge as a LoRA; see reproduce/README.md, \"Test-time scaling\")" >&2; exit 2; }
endif

eval-tts: tts-endpoints setup $(if $(filter tiny,$(PROFILE)),$(TINY_MODEL))  ## hybrid test-time scaling for PROFILE (tiny: ~30 min)
ifeq ($(PROFILE),tiny)
	$(BIN)/deepswe-reproduce tts --config configs/tiny.yaml --out $(TTS_OUT) $(TTS_OVERRIDES)
else
	$(BIN)/deepswe-reproduce tts --config configs/$(PROFILE).yaml --out $(TTS_OUT) \
	  eval.policy.base_url=$(BASE_URL) tts.judge.base_url=$(JUDGE_URL) $(TTS_OVERRIDES)
endif
	@echo "make eval-tts: report in $(TTS_OUT)/report.md"

vllm:  ## vLLM's CPU build in .venv-vllm (make reproduce serves the tiny checkpoints with it)
	@bash infra/vllm/install-cpu.sh

# The main job: setup (timed for the report), then every stage of the profile's pipeline
# (reproduce/README.md). Resumable: a rerun continues from the first stage not done; FRESH=1
# starts over. REPRODUCE_OVERRIDES='reproduce.a.b=v ...' edits the profile's reproduce: section.
reproduce:  ## the main job: every stage for PROFILE, resumable (FRESH=1 starts over); report in runs/reproduce-PROFILE/
	@mkdir -p runs && date +%s > runs/.reproduce-$(PROFILE)-setup-start
	@$(MAKE) --no-print-directory setup $(if $(filter tiny,$(PROFILE)),vllm BASE_SUITE=bookworm)
	$(BIN)/deepswe-reproduce run --config configs/$(PROFILE).yaml $(if $(FRESH),--fresh) \
	  --setup-seconds $$(( $$(date +%s) - $$(cat runs/.reproduce-$(PROFILE)-setup-start) )) $(REPRODUCE_OVERRIDES)

publish: $(INSTALLED)  ## stage RUN=runs/ID [EVAL=runs/ID] for REPO=ns/name, print the plan; PUSH=1 pushes; FORCE=1 past failed checks
	@[ -n "$(RUN)$(EVAL)" ] && [ -n "$(REPO)" ] || { echo "make publish: set RUN=runs/<train-id> and/or EVAL=runs/<eval-id>, and REPO=namespace/name" >&2; exit 2; }
	$(BIN)/deepswe-train publish $(RUN) $(if $(EVAL),--eval $(EVAL)) --repo $(REPO) $(if $(PUSH),--push) $(if $(FORCE),--force) $(PUBLISH_FLAGS)

bench: $(INSTALLED)  ## run the benchmarks in bench/
	@ls bench/*.py >/dev/null 2>&1 || { echo "make bench: not built yet: no benchmark in bench/" >&2; exit 2; }
	@for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done
