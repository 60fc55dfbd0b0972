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

from ...core.errors import UserError, progress
from ...core.line import REPO, Line
from ...core.vllm_src import VllmSrc

SCRIPTS = REPO / "scripts" / "benchmarks"
# A side of a comparison: the vLLM tree a script runs in, and its arguments.
Side = tuple[Path, tuple[str, ...]]


def base_tree(layout: Line) -> Path:
    """The unpatched base, to run the same benchmark before and after."""
    tag = layout.pin.tag
    src = VllmSrc(layout.src)
    return src.scratch_worktree(layout.build / "vllm-base", tag).path


def run_script(
    layout: Line,
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
    layout.build.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS / script), *args],
        env=env,
        cwd=layout.build,
        text=True,
        capture_output=True)
    if proc.returncode != 0:
        print(proc.stderr[-3000:], file=sys.stderr)
        raise UserError(
            f"{script} failed with exit status {proc.returncode} (the end of "
            "its stderr is above)",
            f"run it alone: cd {layout.build} && PYTHONPATH={tree} "
            f"{sys.executable} {SCRIPTS / script} {' '.join(args)}")
    return [
        json.loads(line) for line in proc.stdout.splitlines()
        if line.startswith("{")
    ]


def alternating_rounds(layout: Line, script: str, label: str,
                       sides: dict[str, Side], rounds: int,
                       env: dict[str, str]) -> dict[str, list[list[dict]]]:
    """Run `script` once per side in each of `rounds` rounds, the order
    reversed every other round, so that the machine's noise hits the sides
    alike; per side, the JSON lines of each round."""
    results: dict[str, list[list[dict]]] = {name: [] for name in sides}
    for round_number in range(rounds):
        order = list(sides)
        if round_number % 2:
            order.reverse()
        for name in order:
            progress(f"{label}: {name}, round {round_number + 1}/{rounds}")
            tree, args = sides[name]
            results[name].append(
                run_script(layout, script, tree, *args, env=env))
    return results
