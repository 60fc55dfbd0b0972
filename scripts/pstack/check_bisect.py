"""`make check-bisect`: every prefix of the series stands on its own.

For each patch, in a scratch worktree of vllm-src checked out at that patch
(the base plus the patches before it): the Python files it touches compile,
pass the base's linters (ruff, yapf, isort with the base's own settings), and
the vLLM test files it adds or modifies pass. The compiled extension and the
venv are shared: the series changes Python only.

Two ways to save time:
- Called from `make test` (`tip_results`), a patch's test file that is
  byte-identical at the tip is not run again at the prefix: make test has just
  run it at the tip, and its result there is reported. This catches a test
  file a later patch changed, not a later patch that fixes code an unchanged
  test needs; `make check-bisect` alone runs every file at every prefix.
- A prefix whose tree, test files and environment (venv, test setup, this
  tool) were already checked and passed at its own prefix, as recorded in
  build/check-bisect.json, is not checked again (`--again` forces it).

Results (per patch: tree id, checks, test summary, where the tests ran) are
kept in build/check-bisect.json; `make pr` quotes them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .common import REPO, BasePin, Paths, UserError, git, main_wrapper, progress
from .run_tests import DESELECT_FILE, deselected, test_env
from .srctree import SERIES, scratch_worktree

RESULTS = REPO / "build" / "check-bisect.json"
LINTERS = {
    "ruff": ["-m", "ruff", "check", "--quiet"],
    "yapf": ["-m", "yapf", "--diff"],
    "isort": ["-m", "isort", "--check-only", "--quiet"],
}


@dataclass
class PatchResult:
    subject: str
    commit: str = ""
    tree: str = ""
    checks: dict[str, str] = field(default_factory=dict)  # check -> "ok" or why not
    tests: list[str] = field(default_factory=list)        # the patch's test files
    ran: str = ""                                         # where/how the tests ran
    seconds: float = 0.0
    date: str = ""
    env: str = ""

    @property
    def ok(self) -> bool:
        return all(v == "ok" for v in self.checks.values())


def _changed(tree: Path, commit: str) -> list[str]:
    out = git(tree, "diff-tree", "--no-commit-id", "--name-only", "-r",
              "--diff-filter=AM", commit)
    return out.split()


def env_key() -> str:
    """What besides the tree decides a check's outcome: venv, test setup, this tool."""
    h = hashlib.sha256(sys.version.encode())
    venv_deps = Path(sys.prefix) / ".pstack-deps"
    for f in (venv_deps, DESELECT_FILE, Path(__file__),
              Path(__file__).with_name("hub_standins.py"),
              Path(__file__).with_name("tiny_models.py")):
        h.update(f.read_bytes() if f.exists() else b"-")
    return h.hexdigest()[:16]


def junit_by_file(junit: Path, files: list[str]) -> dict[str, str]:
    """Outcome per test file of a pytest --junitxml run: 'ok' or 'N failed'."""
    counts = {f: [0, 0] for f in files}  # passed-or-skipped, failed
    modules = {f: f[:-3].replace("/", ".") for f in files}
    if junit.exists():
        for case in ET.parse(junit).getroot().iter("testcase"):
            name = case.get("classname") or case.get("name") or ""
            for f, mod in modules.items():
                if name == mod or name.startswith(mod + "."):
                    bad = case.find("failure") is not None or case.find("error") is not None
                    counts[f][1 if bad else 0] += 1
    return {f: ("ok" if failed == 0 and n else
                f"{failed} failed" if failed else "not run")
            for f, (n, failed) in counts.items()}


def check_patch(tree: Path, commit: str, env: dict[str, str], skip_tests: bool,
                deselect: list[str], covered: dict[str, str]) -> PatchResult:
    """Check one prefix. `covered`: test files whose tip result stands for this prefix."""
    start = time.monotonic()
    git(tree, "checkout", "-q", "--detach", commit)
    result = PatchResult(git(tree, "log", "-1", "--format=%s", commit).strip(), commit,
                         git(tree, "rev-parse", f"{commit}^{{tree}}").strip())
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
    result.tests = [f for f in py if Path(f).name.startswith("test_")]
    here = [f for f in result.tests if f not in covered]
    at_tip = [f for f in result.tests if f in covered]
    notes, failures = [], []
    if skip_tests:
        notes.append("not run (--no-tests)")
    elif not result.tests:
        notes.append("no tests in this patch")
    if here and not skip_tests:
        t0 = time.monotonic()
        proc = run(["-m", "pytest", "-q", "-p", "no:cacheprovider",
                    *[f"--deselect={d}" for d in deselect], *here])
        summary = (proc.stdout.strip().splitlines() or ["no output"])[-1]
        print(f"    {summary}  ({time.monotonic() - t0:.0f}s)", flush=True)
        notes.append(f"{len(here)} file(s) here: {summary}")
        if proc.returncode != 0:
            failed = [line for line in proc.stdout.splitlines()
                      if line.startswith(("FAILED ", "ERROR "))]
            for line in failed:
                print(f"    {line}", flush=True)
            failures.append(summary + (f" ({failed[0]})" if failed else ""))
    if at_tip and not skip_tests:
        bad = [f"{f}: {covered[f]}" for f in at_tip if covered[f] != "ok"]
        notes.append(f"{len(at_tip)} file(s) identical at the tip, run there by make test")
        print(f"    {len(at_tip)} test file(s) as at the tip: result of make test's run",
              flush=True)
        failures += bad
    result.checks["tests"] = "ok" if not failures else "; ".join(failures)[:200]
    result.ran = "; ".join(notes)
    result.seconds = round(time.monotonic() - start, 1)
    result.date = time.strftime("%Y-%m-%d %H:%M:%S")
    return result


def load_results(path: Path = RESULTS) -> list[dict]:
    """Recorded results, most recent first (records of older formats are skipped)."""
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return []
    return [r for r in data if isinstance(r, dict) and "tree" in r and "checks" in r]


def _save(path: Path, results: list[PatchResult]) -> None:
    """Keep the latest record per tree (most recent first), bounded."""
    new = [asdict(r) for r in results]
    trees = {r.tree for r in results}
    old = [r for r in load_results(path) if r.get("tree") not in trees]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps((new + old)[:200], indent=1) + "\n")


def check_bisect(paths: Paths, skip_tests: bool = False,
                 tip_results: dict[str, str] | None = None, reuse: bool = True,
                 results_file: Path = RESULTS) -> list[PatchResult]:
    """Check every prefix. `tip_results` (test file -> outcome of make test's run
    at the tip) lets a prefix reuse the tip's run of a file it shares with the tip."""
    pin = BasePin.load(paths.base_file)
    commits = git(paths.src, "rev-list", "--reverse", f"{pin.tag}..{SERIES}").split()
    if not commits:
        raise UserError("the series is empty", "nothing to check")
    tip = commits[-1]
    env = test_env()
    deselect = deselected()
    key = env_key()
    known = {r["tree"]: r for r in load_results(results_file)
             if r.get("tree") and r.get("env") == key
             and all(v == "ok" for v in r.get("checks", {"-": "-"}).values())
             and "at the tip" not in r.get("ran", "") and "not run" not in r.get("ran", "")}
    tree = None
    results = []
    for i, commit in enumerate(commits, 1):
        subject = git(paths.src, "log", "-1", "--format=%s", commit).strip()
        progress(f"[{i}/{len(commits)}] {subject[:70]}")
        sha = git(paths.src, "rev-parse", f"{commit}^{{tree}}").strip()
        if reuse and not skip_tests and sha in known:
            r = PatchResult(**{**known[sha], "commit": commit})
            r.ran = f"as recorded on {r.date} for this tree: {r.ran}"
            print(f"    same tree, tools and venv as the passing check of {r.date}: "
                  "not re-run", flush=True)
            results.append(r)
            continue
        covered = {}
        if tip_results:
            # Test files that are the same at the tip: make test ran them there.
            differ = set(git(paths.src, "diff", "--name-only", commit, tip, "--",
                             *tip_results).split())
            covered = {f: v for f, v in tip_results.items() if f not in differ}
        if tree is None:
            tree = scratch_worktree(paths, "bisect", SERIES)
        r = check_patch(tree, commit, env, skip_tests, deselect, covered)
        r.env = key
        results.append(r)
    if not skip_tests:  # reused records stay as they were
        _save(results_file, [r for r in results if not r.ran.startswith("as recorded")])
    return results


def print_report(results: list[PatchResult]) -> None:
    checks = list(results[0].checks)
    print("\n" + " | ".join(["#", "patch", *checks, "tests ran", "s"]))
    for i, r in enumerate(results, 1):
        print(" | ".join([str(i), r.subject[:60], *(r.checks.get(c, "-") for c in checks),
                          r.ran, f"{r.seconds:.0f}"]))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="check-bisect", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-tests", action="store_true",
                        help="compile and lint only (fast)")
    parser.add_argument("--again", action="store_true",
                        help="re-check prefixes already recorded as passing")
    parser.add_argument("--json", type=Path, help="also write this run's results here")
    args = parser.parse_args(argv)
    start = time.monotonic()
    results = check_bisect(Paths.default(), args.no_tests, reuse=not args.again)
    print_report(results)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2))
    failed = [r.subject for r in results if not r.ok]
    if failed:
        raise UserError("not bisectable at: " + "; ".join(failed))
    print(f"\ncheck-bisect: all {len(results)} prefixes of the series pass "
          f"({time.monotonic() - start:.0f}s)")
    return 0


if __name__ == "__main__":
    main_wrapper(main)
