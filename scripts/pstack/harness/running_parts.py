"""Which parts of a `make test` run are still running, so that the last
one can use both cores.

Each part (a line's, and the project's tests) holds a file named after it
in build/running/, with its process id, while it runs. Side by side the
parts keep both cores busy; once a line's part is the only one left, one
core would idle while its pytest batches run one after the other, so it
runs two at once (run_tests.vllm_tests_at_tip). A file whose process is
gone (an interrupted run) does not count.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def running_dir(root: Path) -> Path:
    return root / "build" / "running"


@contextmanager
def running(root: Path, name: str) -> Iterator[None]:
    """Mark the part `name` of the run in the checkout at `root` as running
    for as long as the block runs."""
    marker = running_dir(root) / name
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(f"{os.getpid()}\n")
    try:
        yield
    finally:
        marker.unlink(missing_ok=True)


def others_running(root: Path, name: str) -> list[str]:
    """The parts other than `name` whose process is alive, sorted.

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> with running(root, "0.9.2"), running(root, "0.32.0"):
    ...     others_running(root, "0.32.0")
    ['0.9.2']
    >>> others_running(root, "0.32.0")
    []
    """
    found = []
    folder = running_dir(root)
    for marker in sorted(folder.iterdir()) if folder.is_dir() else []:
        if marker.name == name:
            continue
        try:
            pid = int(marker.read_text())
        except (OSError, ValueError):
            continue  # being written, or gone
        if _alive(pid):
            found.append(marker.name)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def batches_at_once(root: Path, name: str) -> int:
    """How many pytest batches the part `name` runs at once now: one while
    other parts keep the cores busy, else one per core (at most two: a
    batch's engines run one OpenMP thread each, and the memory budget holds
    two parts' engines, not more)."""
    if others_running(root, name):
        return 1
    return max(1, min(2, os.cpu_count() or 1))
