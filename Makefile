# vLLM KV-offloading patch stack. `make help` lists the targets with what each
# does and the variables it takes: their one description is the command table
# in scripts/pstack/cli.py (tests/test_cli.py keeps it the only one).
#
# Every target runs the tool the same way, `$(PSTACK) <command>`. The patch
# queue (and `make help`) needs only the standard library and runs with
# $(PYTHON), before .venv exists; the build and the harness run in .venv
# (VPY below).

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
models wheel test stress slow-copies bench demo check-bisect pr: private PY = $(VPY)
# PROFILE=gpu runs on a GPU machine with the Python that has the CUDA wheel
# and lm-eval (PYTHON=...), not .venv. See docs/testing.md.
lm-eval: private PY = $(if $(filter gpu,$(PROFILE)),$(PYTHON),$(VPY))

.PHONY: all wheel apply export sync check-series check-bisect rebase rebase-abort rebase-report pr \
        fetch setup models test stress slow-copies bench lm-eval demo clean help

all: wheel

help:
	@$(PSTACK) help --make

fetch:
	$(PSTACK) fetch all

apply:
	$(PSTACK) apply $(if $(FORCE),--force)

export:
	$(PSTACK) export

check-series:
	$(PSTACK) check-series

rebase:
	$(PSTACK) rebase $(TO)

rebase-abort:
	$(PSTACK) rebase --abort $(TO)

rebase-report:
	$(PSTACK) rebase-report $(TO)

pr: setup
	$(PSTACK) pr $(N)

check-bisect: setup
	$(PSTACK) check-bisect $(ARGS)

sync:
	@$(PSTACK) sync

setup: sync
	$(PSTACK) setup

models: setup
	$(PSTACK) models

# The model of the generate that verifies a CPU wheel made from a published
# one (build/wheels.py); a line whose CPU wheel is built does not use it.
wheel: setup
	$(PSTACK) wheel --smoke-model "$$($(PSTACK) models tiny-llama | tail -n 1)"

test: setup
	@$(PSTACK) fetch all >/dev/null   # tests never download
	$(PSTACK) test -- $(ARGS)

stress: setup
	$(PSTACK) stress $(if $(N),--requests $(N)) $(if $(SEED),--seed $(SEED)) $(if $(K),-k '$(K)')

slow-copies: setup
	$(PSTACK) slow-copies $(if $(DELAY),--delay $(DELAY)) $(if $(K),-k '$(K)')

bench: setup
	$(PSTACK) bench $(B)

demo: setup
	$(PSTACK) demo $(ARGS)

lm-eval: $(if $(filter gpu,$(PROFILE)),,setup)
	$(PSTACK) lm-eval $(if $(PROFILE),--profile $(PROFILE)) $(foreach m,$(MODEL),--model $(m)) $(ARGS)

clean:
	rm -rf dist build .pytest_cache
