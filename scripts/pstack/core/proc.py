"""Running other programs."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
from pathlib import Path


def run_process(cmd: list[str | Path],
                *,
                cwd: Path | None = None,
                env: dict[str, str] | None = None,
                check: bool = True,
                capture: bool = False) -> subprocess.CompletedProcess:
    """Run `cmd` with `env` on top of this process's environment; its
    output goes to the terminal unless `capture`."""
    pipe = subprocess.PIPE if capture else None
    full_env = None if env is None else {**os.environ, **env}
    return subprocess.run([str(c) for c in cmd],
                          cwd=cwd,
                          env=full_env,
                          check=check,
                          text=True,
                          stdout=pipe,
                          stderr=pipe)


def failure_of(proc: subprocess.CompletedProcess) -> str:
    """Why a captured process failed, in one line: its last line on stderr,
    else the signal that killed it (an illegal instruction, say) or its exit
    status."""
    lines = (proc.stderr or "").strip().splitlines()
    if lines:
        return lines[-1]
    if proc.returncode < 0:
        return f"killed by {signal.Signals(-proc.returncode).name}"
    return f"exit status {proc.returncode}, nothing on stderr"


def cpu_seconds() -> float:
    """CPU time (user and system) of this process and of the children it
    has waited for, theirs included: on a machine whose cores are all busy,
    what a step costs the others.

    >>> cpu_seconds() > 0
    True
    """
    mine = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (mine.ru_utime + mine.ru_stime + children.ru_utime +
            children.ru_stime)
