"""A pytest plugin for `make slow-copies`: every transfer of the offloading
connector takes PSTACK_COPY_DELAY_S seconds longer.

Loaded into a line's vLLM test run (`-p pstack.harness.slow_copies_plugin`),
it wraps the functions that move one transfer's blocks (between the KV
cache and the CPU tier, between the CPU tier and the fs tier's files), on
the threads that run them (slow_copies_hook.py); the processes the tests
start do the same from slow_copies_site/sitecustomize.py. The engine goes
on stepping meanwhile, so stores are still in flight when a request
finishes and loads when the scheduler next looks. A test that assumes a
transfer is done by the time a call returns fails here every time, instead
of once in a while on a loaded machine.
"""

from __future__ import annotations

import importlib
import os

import pytest

from .slow_copies_hook import DELAY_ENV, TRANSFER_FUNCTIONS, install

# What the plugin delayed, and by how much: said when the session starts.
_DELAYED = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    delay_s = float(os.environ.get(DELAY_ENV, "0.3"))
    # Installed first: the modules imported below are wrapped as they run.
    install(delay_s)
    # Imported here, so that what this vLLM has is said before any test.
    for module_name in dict.fromkeys(m for m, _ in TRANSFER_FUNCTIONS):
        try:
            importlib.import_module(module_name)
        except ImportError:
            continue
    found = install(delay_s)  # (once installed, it says what it wrapped)
    if not found:
        raise pytest.UsageError(
            "slow copies: this vLLM has none of the transfer functions the "
            "plugin knows: " + ", ".join(f"{m}.{p}"
                                         for m, p in TRANSFER_FUNCTIONS))
    config.stash[_DELAYED] = (f"{', '.join(found)} delayed by {delay_s} s "
                              "per transfer")


def pytest_sessionstart(session: pytest.Session) -> None:
    # Said even with -q: a run that was not slowed must not pass for one.
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"slow copies: {session.config.stash[_DELAYED]}")
