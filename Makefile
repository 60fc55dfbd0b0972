# vLLM KV-offloading patch stack. `make help` lists the targets with what each
# does and the variables it takes: their one description is the command table
# in scripts/pstack/cli.py (tests/test_cli.py keeps it the only one).
#
# Every target runs the tool the same way, `$(PSTACK) <command>`, with the
# Python that runs make: the patch queue (and `make help`) needs only the
# standard library; a command that needs a line's runtime runs itself again
# in that line's venv (cli.py), which `make setup` makes.

PYTHON ?= python3
# LINE=<version> picks the line lines/<version>/ (default: the newest line
# with a CPU runtime, the line users run; LINE=newest: the newest line, with
# a runtime or not; core/line.py).
LINE   ?=
PSTACK  = PSTACK_LINE=$(LINE) PYTHONPATH=$(CURDIR)/scripts $(PYTHON) -m pstack

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

# The PRs go against the newest release carried, whether or not it has a CPU
# runtime here (its venv then holds the linters only).
pr: LINE := $(or $(LINE),newest)
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
# one (install/wheels.py); a line whose CPU wheel is built does not use it.
wheel: setup
	$(PSTACK) wheel --smoke-model "$$($(PSTACK) models tiny-llama | tail -n 1)"

# Sets up each line it tests itself (harness/run_tests.py).
test:
	$(PSTACK) test -- $(ARGS)

stress: setup
	$(PSTACK) stress $(if $(N),--requests $(N)) $(if $(SEED),--seed $(SEED)) $(if $(K),-k '$(K)')

slow-copies: setup
	$(PSTACK) slow-copies $(if $(DELAY),--delay $(DELAY)) $(if $(K),-k '$(K)')

bench: setup
	$(PSTACK) bench $(B)

demo: setup
	$(PSTACK) demo $(ARGS)

# PROFILE=gpu runs on a GPU machine with the Python that has the CUDA wheel
# and lm-eval (PYTHON=...), not a line's venv. See docs/testing.md.
lm-eval: $(if $(filter gpu,$(PROFILE)),,setup)
	$(PSTACK) lm-eval $(if $(PROFILE),--profile $(PROFILE)) $(foreach m,$(MODEL),--model $(m)) $(ARGS)

clean:
	rm -rf dist build .pytest_cache
