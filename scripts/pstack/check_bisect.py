"""`make check-bisect`: every prefix of the series stands on its own.

For each patch, in a scratch worktree of vllm-src checked out at that patch
(the base plus the patches before it): the Python files it touches compile,
pass the base's linters (ruff, yapf, isort with the base's own settings), and
the vLLM test files it adds or modifies pass. The compiled extension and the
venv are shared: the series changes Python only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .common import BasePin, Paths, UserError, git, main_wrapper, progress
from .run_tests import deselected, test_env
from .srctree import SERIES, scratch_worktree

LINTERS = {
    "ruff": ["-m", "ruff", "check", "--quiet"],
    "yapf": ["-m", "yapf", "--diff"],
    "isort": ["-m", "isort", "--check-only", "--quiet"],
}


@dataclass
class PatchResult:
    subject: str
    checks: dict[str, str] = field(default_factory=dict)  # check -> "ok" or why not

    @property
    def ok(self) -> bool:
        return all(v == "ok" for v in self.checks.values())


def _changed(tree: Path, commit: str) -> list[str]:
    out = git(tree, "diff-tree", "--no-commit-id", "--name-only", "-r",
              "--diff-filter=AM", commit)
    return out.split()


def check_patch(tree: Path, commit: str, env: dict[str, str], skip_tests: bool,
                deselect: list[str]) -> PatchResult:
    git(tree, "checkout", "-q", "--detach", commit)
    result = PatchResult(git(tree, "log", "-1", "--format=%s", commit).strip())
    py = [f for f in _changed(tree, commit) if f.endswith(".py")]
    run_env = {**os.environ, **env, "PYTHONPATH": str(tree)}

    def run(args: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *args], cwd=tree, env=run_env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    proc = run(["-m", "compileall", "-q", *py]) if py else None
    result.checks["compile"] = "ok" if proc is None or proc.returncode == 0 else (
        proc.stdout.strip().splitlines() or ["failed"])[-1]
    for name, args in LINTERS.items():
        proc = run([*args, *py]) if py else None
        bad = proc is not None and (proc.returncode != 0 or
                                    (name == "yapf" and proc.stdout.strip()))
        result.checks[name] = "ok" if not bad else "issues in " + ", ".join(
            sorted({line.split(":")[0] for line in proc.stdout.splitlines()
                    if line.endswith(".py") or ".py:" in line})[:3] or ["output"])
    tests = [f for f in py if Path(f).name.startswith("test_")]
    if skip_tests:
        result.checks["tests"] = "ok"
    elif tests:
        start = time.monotonic()
        proc = run(["-m", "pytest", "-q", "-p", "no:cacheprovider",
                    *[f"--deselect={d}" for d in deselect], *tests])
        summary = (proc.stdout.strip().splitlines() or ["no output"])[-1]
        result.checks["tests"] = "ok" if proc.returncode == 0 else summary
        print(f"    {summary}  ({time.monotonic() - start:.0f}s)")
    else:
        result.checks["tests"] = "no tests in this patch"
    return result


def check_bisect(paths: Paths, skip_tests: bool) -> list[PatchResult]:
    pin = BasePin.load(paths.base_file)
    commits = git(paths.src, "rev-list", "--reverse", f"{pin.tag}..{SERIES}").split()
    if not commits:
        raise UserError("the series is empty", "nothing to check")
    tree = scratch_worktree(paths, "bisect", SERIES)
    env = test_env()
    deselect = deselected()
    results = []
    for i, commit in enumerate(commits, 1):
        progress(f"[{i}/{len(commits)}] {commit[:12]}")
        results.append(check_patch(tree, commit, env, skip_tests, deselect))
    return results


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="check-bisect", description=__doc__)
    parser.add_argument("--no-tests", action="store_true",
                        help="compile and lint only (fast)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    results = check_bisect(Paths.default(), args.no_tests)
    checks = list(results[0].checks)
    print("\n" + " | ".join(["patch", *checks]))
    for r in results:
        print(" | ".join([r.subject[:60], *(r.checks[c] for c in checks)]))
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in results], indent=2))
    failed = [r.subject for r in results if not r.ok]
    if failed:
        raise UserError("not bisectable at: " + "; ".join(failed))
    print(f"\ncheck-bisect: all {len(results)} prefixes of the series pass")
    return 0


if __name__ == "__main__":
    main_wrapper(main)
