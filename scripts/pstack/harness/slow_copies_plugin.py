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

One assertion is waived (TIMING_ASSERTIONS): upstream's check that a hit
loaded from a tier is faster than recomputing, which no late transfer
passes. The function that makes it fails there only after the rest of its
checks have run, and the test goes on (upstream's accuracy check, with
transfers as late); any other failure is a failure. Each waiver is said.
"""

from __future__ import annotations

import functools
import importlib
import os
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import pytest

from .slow_copies_hook import DELAY_ENV, TRANSFER_FUNCTIONS, install

# What the plugin delayed, and by how much: said when the session starts.
_DELAYED = pytest.StashKey[str]()
# (test file, function, the asserted expression): a timing assertion that
# every transfer made late fails by design. Upstream's _latency_test times
# ten tier hits against recomputing and asserts that eight were faster,
# as its last statement: its other checks (a stored event for each hit)
# have run by then.
TIMING_ASSERTIONS = (("test_offloading_connector.py", "_latency_test",
                      "num_times_cpu_better_than_cold >="), )
# The tests whose timing assertion was waived, as pytest names them.
_WAIVED: list[str] = []
# Marks a function whose timing assertion is waived, so none is twice.
_WAIVES = "__pstack_waives__"


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


def without_timing(function: Callable[..., Any],
                   asserted: str) -> Callable[..., Any]:
    """function, its failure waived when it is the assertion `asserted`
    in its own body; any other failure raised."""

    @functools.wraps(function)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except AssertionError as exc:
            failed_at = traceback.extract_tb(exc.__traceback__)[-1]
            if (failed_at.name != function.__name__
                    or asserted not in (failed_at.line or "")):
                raise
            test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]
            _WAIVED.append(test)
            print(f"slow copies: waived {failed_at.line.strip()!r} "
                  f"({function.__name__}; a late transfer is never faster "
                  "than recomputing)")
            return None

    setattr(run, _WAIVES, asserted)
    return run


def _waive_timing_in(module: ModuleType) -> None:
    for file_name, function_name, asserted in TIMING_ASSERTIONS:
        function = getattr(module, function_name, None)
        if (Path(module.__file__ or "").name == file_name
                and function is not None and not hasattr(function, _WAIVES)):
            setattr(module, function_name, without_timing(function, asserted))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for module in {
            item.module
            for item in items if isinstance(item, pytest.Function)
    }:
        _waive_timing_in(module)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _WAIVED:
        terminalreporter.write_line(
            f"slow copies: the timing assertion waived in {len(_WAIVED)} "
            f"test(s), the rest of each run: {', '.join(_WAIVED)}")
