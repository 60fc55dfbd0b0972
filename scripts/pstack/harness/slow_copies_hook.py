"""The delay of `make slow-copies`, in any Python process: each function
that moves an offloading transfer's blocks (TRANSFER_FUNCTIONS) starts
`delay_s` seconds late, wrapped as its module is imported.

The pytest process installs it from slow_copies_plugin.py; every process
the tests start (an engine core, an engine forked for the fs tier's tests,
`vllm serve`, multiprocessing's servers) installs it from the
sitecustomize.py of slow_copies_site/, which `make slow-copies` puts on
PYTHONPATH. The functions are wrapped in their module right after it runs,
before any other module takes them by name (`from .io import
batch_load_block`), so every caller gets the slow one.

Standard library only: this is imported at the start of every process.
"""

from __future__ import annotations

import functools
import importlib.abc
import sys
import time
from types import ModuleType
from typing import Any, Callable

DELAY_ENV = "PSTACK_COPY_DELAY_S"

# (module, attribute path) of each function that moves one transfer's
# blocks, per line: the 0.32 line's host handler (KV cache <-> CPU tier)
# and the fs tier's block files (CPU tier <-> disk); the 0.9.2 and 0.10.2
# lines' threaded handler.
TRANSFER_FUNCTIONS = (
    ("vllm.v1.kv_offload.cpu.host_handler", "copy_runs"),
    ("vllm.v1.kv_offload.tiering.fs.io", "batch_store_block"),
    ("vllm.v1.kv_offload.tiering.fs.io", "batch_load_block"),
    ("vllm.v1.kv_offload.worker.cpu_platform",
     "ThreadedBlockCopyHandler._copy"),
)
_MODULES = {module for module, _ in TRANSFER_FUNCTIONS}
# Marks a function this module made, so that none is wrapped twice.
_MARK = "__pstack_delay_s__"


def delayed(transfer: Callable[..., Any],
            delay_s: float) -> Callable[..., Any]:
    """transfer, starting delay_s seconds late."""

    @functools.wraps(transfer)
    def slow_transfer(*args: Any, **kwargs: Any) -> Any:
        time.sleep(delay_s)
        return transfer(*args, **kwargs)

    setattr(slow_transfer, _MARK, delay_s)
    return slow_transfer


def delay_in(module: ModuleType, delay_s: float) -> list[str]:
    """Wrap the transfer functions `module` defines; their names (with the
    module's), those wrapped before included."""
    found = []
    for module_name, path in TRANSFER_FUNCTIONS:
        if module_name != module.__name__:
            continue
        *owners, name = path.split(".")
        owner: Any = module
        for attr in owners:
            owner = getattr(owner, attr, None)
        function = getattr(owner, name, None)
        if owner is None or not callable(function):
            continue
        if not hasattr(function, _MARK):
            setattr(owner, name, delayed(function, delay_s))
        found.append(f"{module_name}.{path}")
    return found


class _DelayingLoader(importlib.abc.Loader):
    """A module's own loader, whose module gets its transfer functions
    wrapped once it has run; anything else goes to that loader."""

    def __init__(self, loader: Any, delay_s: float):
        self._loader = loader
        self._delay_s = delay_s

    def create_module(self, spec: Any) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        delay_in(module, self._delay_s)

    def __getattr__(self, name: str) -> Any:
        # get_source, get_filename, ...: tracebacks and inspect use them.
        return getattr(self._loader, name)


class _DelayOnImport(importlib.abc.MetaPathFinder):
    """Finds a module of TRANSFER_FUNCTIONS as the finders after it do, and
    hands it a loader that wraps its functions."""

    def __init__(self, delay_s: float):
        self.delay_s = delay_s

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in _MODULES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _DelayingLoader(spec.loader, self.delay_s)
        return spec


def install(delay_s: float) -> list[str]:
    """Delay the transfer functions of this process by delay_s: those of
    modules imported already at once, the others as they are imported.
    Once per process. The names of those wrapped so far."""
    if not any(isinstance(f, _DelayOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _DelayOnImport(delay_s))
    found = []
    for name in sorted(_MODULES):
        if name in sys.modules:
            found += delay_in(sys.modules[name], delay_s)
    return found
