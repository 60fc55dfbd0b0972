"""Running a benchmark script of scripts/benchmarks against a vLLM tree.

Each script prints one JSON object per line; figures are printed by the
benchmark modules, never asserted: they depend on the machine. Benchmarks
that compare against the unpatched base run the same script against a
worktree of vllm-src at the base tag (build/vllm-base).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ...core.layout import REPO, Layout
from ...core.pin import BasePin
from ...core.vllm_src import VllmSrc

SCRIPTS = REPO / "scripts" / "benchmarks"


def base_tree(layout: Layout) -> Path:
    """The unpatched base, to run the same benchmark before and after."""
    tag = BasePin.load(layout.base_file).tag
    src = VllmSrc(layout.src)
    return src.scratch_worktree(layout.build / "vllm-base", tag).path


def run_script(
    layout: Layout,
    script: str,
    tree: Path,
    *args: str,
    env: dict[str, str] | None = None,
    pythonpath: tuple[Path, ...] = ()
) -> list[dict]:
    """The JSON lines `script` prints, run with `tree` (a vLLM checkout)
    first on the path."""
    env = {
        **os.environ,
        **(env or {}),
        "VLLM_LOGGING_LEVEL": "ERROR",
        "PYTHONPATH": os.pathsep.join(map(str, (tree, *pythonpath))),
    }
    layout.build.mkdir(exist_ok=True)
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS / script), *args],
        env=env,
        cwd=layout.build,
        text=True,
        capture_output=True)
    if proc.returncode != 0:
        raise SystemExit(f"{script} failed:\n{proc.stderr[-3000:]}")
    return [
        json.loads(line) for line in proc.stdout.splitlines()
        if line.startswith("{")
    ]
