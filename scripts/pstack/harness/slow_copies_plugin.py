"""A pytest plugin for `make slow-copies`: every copy between the KV cache
and the CPU tier takes PSTACK_COPY_DELAY_S seconds longer.

Loaded into a line's vLLM test run (`-p pstack.harness.slow_copies_plugin`),
it wraps the function of the line's CPU-platform transfer handler that
copies one transfer's blocks, on the thread that does the copy: the engine
goes on stepping meanwhile, so stores are still in flight when a request
finishes and loads when the scheduler next looks. A test that assumes a
transfer is done by the time a call returns fails here every time, instead
of once in a while on a loaded machine.
"""

from __future__ import annotations

import functools
import importlib
import os
import time
from typing import Any, Callable

import pytest

DELAY_ENV = "PSTACK_COPY_DELAY_S"
# What the plugin delayed, and by how much: said when the session starts.
_DELAYED = pytest.StashKey[str]()

# (module, attribute path) of the function that copies one transfer's
# blocks, per line: the 0.32 line's host handler; the 0.9.2 and 0.10.2
# lines' threaded handler. The first one the installed vLLM has is used.
COPY_FUNCTIONS = (
    ("vllm.v1.kv_offload.cpu.host_handler", "copy_runs"),
    ("vllm.v1.kv_offload.worker.cpu_platform",
     "ThreadedBlockCopyHandler._copy"),
)


def delayed(copy: Callable[..., Any], delay_s: float) -> Callable[..., Any]:
    """copy, starting delay_s seconds late."""

    @functools.wraps(copy)
    def slow_copy(*args: Any, **kwargs: Any) -> Any:
        time.sleep(delay_s)
        return copy(*args, **kwargs)

    return slow_copy


def find_copy_function() -> tuple[Any, str]:
    """(owner, name) of the copy function of the installed vLLM."""
    for module_name, path in COPY_FUNCTIONS:
        try:
            owner: Any = importlib.import_module(module_name)
        except ImportError:
            continue
        *owners, name = path.split(".")
        for attr in owners:
            owner = getattr(owner, attr, None)
        if owner is not None and callable(getattr(owner, name, None)):
            return owner, name
    raise pytest.UsageError(
        "slow copies: this vLLM has none of the copy functions the plugin "
        "knows: " + ", ".join(f"{m}.{p}" for m, p in COPY_FUNCTIONS))


def pytest_configure(config: pytest.Config) -> None:
    delay_s = float(os.environ.get(DELAY_ENV, "0.3"))
    owner, name = find_copy_function()
    setattr(owner, name, delayed(getattr(owner, name), delay_s))
    config.stash[_DELAYED] = (f"{owner.__name__}.{name} delayed by "
                              f"{delay_s} s per transfer")


def pytest_sessionstart(session: pytest.Session) -> None:
    # Said even with -q: a run that was not slowed must not pass for one.
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"slow copies: {session.config.stash[_DELAYED]}")
