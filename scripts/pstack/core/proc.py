"""Running other programs."""

from __future__ import annotations

import os
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
