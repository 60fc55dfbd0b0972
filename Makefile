# vLLM KV-offloading patch stack. `make` builds the patched wheels; `make test`
# runs every test. See README.md for the other targets.

PYTHON ?= python3
VENV   ?= .venv
VPY     = $(VENV)/bin/python
PSTACK  = PYTHONPATH=scripts $(PYTHON) -m pstack
VPSTACK = PYTHONPATH=scripts $(VPY) -m pstack

.PHONY: all wheel apply export sync check-series check-bisect rebase rebase-abort rebase-report pr \
        fetch setup models test stress bench lm-eval demo clean help

all: wheel

help:
	@sed -n 's/^## //p' README.md | head -40

fetch:              ## download + verify the pinned sdist and wheel
	$(PSTACK) fetch all

apply:              ## (re)create vllm-src = base + patches/series
	$(PSTACK) apply $(if $(FORCE),--force)

export:             ## vllm-src commits -> patches/*.patch + patches/series
	$(PSTACK) export

check-series:       ## apply + export is a no-op, patches are upstream-shaped
	$(PSTACK) check-series

rebase:             ## move the series onto vLLM $(TO); re-run to continue after a conflict
	$(PSTACK) rebase $(TO)

rebase-abort:       ## undo a rebase under way: series, upstream and the pin as before
	$(PSTACK) rebase --abort

rebase-report:      ## rebase a copy in build/ (not vllm-src): docs/rebase-$(TO).md
	$(PSTACK) rebase --report $(TO)

pr:                 ## out/pr/<nn>-<slug>/: branch, title, body, patch (N=<number|name>)
	$(PSTACK) pr $(N)

check-bisect: setup ## every prefix of the series compiles, lints and passes its tests
	PYTHONPATH=scripts $(VPY) -m pstack.check_bisect $(ARGS)

sync:
	@$(PSTACK) sync

setup: sync         ## .venv with the CPU runtime, vllm-src installed editable
	PYTHONPATH=scripts $(PYTHON) -m pstack.setup_env

models: setup       ## tiny local test models into the cache
	$(VPSTACK) models

wheel: setup        ## dist/: CUDA wheel (official + overlay) and CPU wheel, both verified
	$(VPSTACK) wheel

test: setup         ## everything CI runs
	@$(PSTACK) fetch all >/dev/null   # tests never download
	PYTHONPATH=scripts $(VPY) -m pstack.run_tests $(ARGS)

stress: setup       ## differential stress test, engine without vs with the connector (N=, SEED=)
	PYTHONPATH=scripts $(VPY) -m pstack.stress $(if $(N),--requests $(N)) $(if $(SEED),--seed $(SEED)) $(if $(K),-k '$(K)')

bench: setup        ## print the benchmark tables (B=<name> for one)
	PYTHONPATH=scripts $(VPY) -m pstack.bench $(B)

demo: setup         ## offloading on a local model: cold run, then the CPU tier serves the prompts
	PYTHONPATH=scripts $(VPY) -m pstack.demo $(ARGS)

# PROFILE=gpu runs on a GPU machine with the Python that has the CUDA wheel
# and lm-eval (PYTHON=...), not .venv. See README.md.
GATE_PY = $(if $(filter gpu,$(PROFILE)),$(PYTHON),$(VPY))
lm-eval: $(if $(filter gpu,$(PROFILE)),,setup)  ## correctness gate: same answers with offloading (PROFILE=gpu MODEL=...)
	PYTHONPATH=scripts $(GATE_PY) -m pstack.lm_eval_gate $(if $(PROFILE),--profile $(PROFILE)) $(foreach m,$(MODEL),--model $(m)) $(ARGS)

clean:              ## remove build outputs (keeps vllm-src and the caches)
	rm -rf dist build .pytest_cache
