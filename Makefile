# vLLM KV-offloading patch stack. `make` builds the patched wheels; `make test`
# runs every test; `make help` lists the targets.
#
# Every target runs the tool the same way, `$(PSTACK) <command>`: see
# `$(PSTACK) --help` and scripts/pstack/cli.py. The patch queue needs only
# the standard library and runs with $(PYTHON), before .venv exists; the
# build and the harness run in .venv (RUNTIME_PY below).

PYTHON ?= python3
VPY     = $(VENV)/bin/python
PY      = $(PYTHON)
# LINE=<version> picks the line on that vLLM release, patches-<version>/
# with vllm-src-<version>/ and .venv-<version>/ (default: the line in
# patches/, vllm-src/ and .venv/).
LINE   ?=
# As Layout.existing_line: LINE naming the default line's release keeps .venv.
VENV   ?= $(if $(wildcard patches-$(LINE)),.venv-$(LINE),.venv)
PSTACK  = PSTACK_LINE=$(LINE) PYTHONPATH=scripts $(PY) -m pstack

# `private`: not inherited by prerequisites (setup must run with $(PYTHON)).
models wheel test stress bench demo check-bisect: private PY = $(VPY)
# PROFILE=gpu runs on a GPU machine with the Python that has the CUDA wheel
# and lm-eval (PYTHON=...), not .venv. See docs/testing.md.
lm-eval: private PY = $(if $(filter gpu,$(PROFILE)),$(PYTHON),$(VPY))

.PHONY: all wheel apply export sync check-series check-bisect rebase rebase-abort rebase-report pr \
        fetch setup models test stress bench lm-eval demo clean help

all: wheel

help:               ## this list
	@sed -n 's/^\([a-z-]*\):[^#]*## \(.*\)/  make \1\t\2/p' Makefile | expand -t 24

fetch:              ## download + verify the pinned sdist and wheel
	$(PSTACK) fetch all

apply:              ## (re)create vllm-src = base + patches/series (FORCE=1)
	$(PSTACK) apply $(if $(FORCE),--force)

export:             ## vllm-src commits -> patches/*.patch + patches/series
	$(PSTACK) export

check-series:       ## apply + export is a no-op, patches are upstream-shaped
	$(PSTACK) check-series

rebase:             ## carry the line onto vLLM $(TO) as patches-$(TO)/; re-run to continue after a conflict
	$(PSTACK) rebase $(TO)

rebase-abort:       ## undo a carry under way (TO= if several)
	$(PSTACK) rebase --abort $(TO)

rebase-report:      ## rebase a copy in build/ (not vllm-src): docs/rebase-$(TO).md
	$(PSTACK) rebase-report $(TO)

pr:                 ## out/pr/<nn>-<slug>/: branch, title, body, patch (N=<number|name>)
	$(PSTACK) pr $(N)

check-bisect: setup ## every prefix of the series compiles, lints and passes its tests (ARGS=)
	$(PSTACK) check-bisect $(ARGS)

sync:               ## apply, unless vllm-src holds work of its own (run by setup)
	@$(PSTACK) sync

setup: sync         ## .venv with the CPU runtime, vllm-src installed editable
	$(PSTACK) setup

models: setup       ## tiny local test models into the cache
	$(PSTACK) models

wheel: setup        ## dist/ (dist/<version>/ for LINE=): CUDA wheel (official + overlay) and CPU wheel, both verified
	$(PSTACK) wheel

test: setup         ## everything CI runs, on every line (LINE= for one line's part; ARGS= for pytest: project tests only)
	@$(PSTACK) fetch all >/dev/null   # tests never download
	$(PSTACK) test -- $(ARGS)

stress: setup       ## differential stress test, engine without vs with the connector (N=, SEED=, K=)
	$(PSTACK) stress $(if $(N),--requests $(N)) $(if $(SEED),--seed $(SEED)) $(if $(K),-k '$(K)')

bench: setup        ## print the benchmark tables (B=<name> for one)
	$(PSTACK) bench $(B)

demo: setup         ## offloading on a local model: cold run, then the CPU tier serves the prompts
	$(PSTACK) demo $(ARGS)

lm-eval: $(if $(filter gpu,$(PROFILE)),,setup)  ## correctness gate: same answers with offloading (PROFILE=gpu MODEL=...)
	$(PSTACK) lm-eval $(if $(PROFILE),--profile $(PROFILE)) $(foreach m,$(MODEL),--model $(m)) $(ARGS)

clean:              ## remove build outputs (keeps vllm-src and the caches)
	rm -rf dist build .pytest_cache
