"""`make check-bisect`: every prefix of the series stands on its own.

For each patch, in a scratch worktree of vllm-src checked out at that patch
(the base plus the patches before it): the Python files it touches compile,
pass the base's linters (ruff, yapf, isort with the base's own settings),
and the vLLM test files it adds or modifies pass. The compiled extension and
the venv are shared: the series changes Python only.

Ways to save time:
- Called from `make test` (`tip_results`), a patch's test file that is
  byte-identical at the tip is not run again at the prefix: make test has
  just run it at the tip, and its result there is reported. This catches a
  test file a later patch changed, not a later patch that fixes code an
  unchanged test needs; `make check-bisect` alone runs every file at every
  prefix.
- A prefix whose tree, test files and environment (venv, test setup, this
  tool) were already checked and passed at its own prefix, as recorded in
  build/check-bisect.json, is not checked again (`--again` forces it).
- Called from `make test` (`forks`), a prefix's pytest run is forked from
  a server that has imported, once, the modules from outside the tree that
  vLLM's tests/conftest.py needs at the tip (pytest_forks.py): the run
  imports only its prefix's vLLM and tests.
- Called from `make test` (`at_once`), two prefixes are checked at once,
  each in a scratch worktree of its own, while no other part of the run
  keeps the cores busy: a prefix's pytest process waits for its engines
  much of the time, and alone it left one core idle. Each prefix's output
  is shown whole when it ends.

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
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import (FIRST_COMPLETED, Future, ThreadPoolExecutor,
                                wait)
from dataclasses import asdict, replace
from pathlib import Path

from ..core import lint as core_lint
from ..core.check_results import PatchResult, load_results, save_results
from ..core.errors import UserError, progress
from ..core.gitrepo import GitRepo
from ..core.line import Line
from ..core.lint import lint, linters_for
from ..core.vllm_src import SERIES, VllmSrc
from ..install.line_venv import stamp
from .pytest_forks import PytestForks
from .testenv import DESELECT_FILE, deselected, test_env

HERE = Path(__file__).parent


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-tests",
                        action="store_true",
                        help="compile and lint only (fast)")
    parser.add_argument("--again",
                        action="store_true",
                        help="re-check prefixes already recorded as passing")
    parser.add_argument("--json",
                        type=Path,
                        help="also write this run's results here")


def run(args: argparse.Namespace, layout: Line) -> int:
    start = time.monotonic()
    results = check_bisect(layout, args.no_tests, reuse=not args.again)
    print_report(results)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results],
                                        indent=2))
    failed = [r.subject for r in results if not r.ok]
    if failed:
        raise UserError("not bisectable at: " + "; ".join(failed))
    print(f"\ncheck-bisect: all {len(results)} prefixes of the series pass "
          f"({time.monotonic() - start:.0f}s)")
    return 0


# The files of the test setup and of this tool that decide a check's
# outcome: a change to one checks every prefix again.
ENV_INPUTS = (DESELECT_FILE, Path(core_lint.__file__),
              *(HERE / name for name in ("check_bisect.py", "testenv.py",
                                         "hub_standins.py", "tiny_models.py",
                                         "counting_model.py")))


def env_key() -> str:
    """What besides the tree decides a check's outcome: the Python and the
    venv's packages, the test setup and this tool."""
    h = hashlib.sha256(sys.version.encode())
    for f in (stamp(Path(sys.prefix), "deps"), *ENV_INPUTS):
        h.update(f.read_bytes() if f.exists() else b"-")
    return h.hexdigest()[:16]


def check_patch(tree: GitRepo,
                commit: str,
                env: dict[str, str],
                skip_tests: bool,
                deselect: list[str],
                covered: dict[str, str],
                say: Callable[[str], None] = print,
                forks: PytestForks | None = None) -> PatchResult:
    """Check one prefix. `covered`: test files whose result at the tip
    stands for this prefix; `say`: where its lines of output go; `forks`:
    the server to fork its pytest run from (else a process of its own)."""
    start = time.monotonic()
    tree.git("checkout", "-q", "--detach", commit)
    result = PatchResult(tree.subject(commit), commit, tree.tree(commit))
    py = [f for f in tree.changed_files(commit, "AM") if f.endswith(".py")]
    run_env = {**os.environ, **env, "PYTHONPATH": str(tree.path)}
    result.checks["compile"] = compile_check(tree.path, run_env, py)
    for linter in linters_for(tree.path):
        result.checks[linter] = lint(linter, py, tree.path, run_env).summary
    result.tests = [f for f in py if Path(f).name.startswith("test_")]
    result.tests_skipped = skip_tests
    notes, failures = [], []
    if skip_tests:
        notes.append("not run (--no-tests)")
    elif not result.tests:
        notes.append("no tests in this patch")
    else:
        here = [f for f in result.tests if f not in covered]
        result.tip_files = [f for f in result.tests if f in covered]
        outcomes = []
        if here:
            outcomes.append(
                tests_here(tree.path, run_env, here, deselect, say, forks))
        if result.tip_files:
            outcomes.append(tests_at_tip(result.tip_files, covered, say))
        for note, failed in outcomes:
            notes.append(note)
            failures += failed
    result.checks["tests"] = "ok" if not failures else "; ".join(
        failures)[:200]
    result.ran = "; ".join(notes)
    result.seconds = round(time.monotonic() - start, 1)
    result.date = time.strftime("%Y-%m-%d %H:%M:%S")
    return result


def run_python(cwd: Path, env: dict[str, str],
               args: list[str]) -> subprocess.CompletedProcess:
    """This venv's Python on `args` in `cwd`, its output (both streams) in
    .stdout."""
    return subprocess.run([sys.executable, *args],
                          cwd=cwd,
                          env=env,
                          text=True,
                          stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT)


def compile_check(cwd: Path, env: dict[str, str], py: list[str]) -> str:
    """'ok' if the Python files compile, else compileall's last line."""
    if not py:
        return "ok"
    proc = run_python(cwd, env, ["-m", "compileall", "-q", *py])
    if proc.returncode == 0:
        return "ok"
    return (proc.stdout.strip().splitlines() or ["failed"])[-1]


def tests_here(cwd: Path,
               env: dict[str, str],
               files: list[str],
               deselect: list[str],
               say: Callable[[str], None] = print,
               forks: PytestForks | None = None) -> tuple[str, list[str]]:
    """Run the test files at this prefix: a note on the run, and the
    failure (with the first failed test) if any."""
    t0 = time.monotonic()
    args = [
        "-q", "-p", "no:cacheprovider", *[f"--deselect={d}" for d in deselect],
        *files
    ]
    returncode, output = _pytest(cwd, env, args, forks)
    summary = (output.strip().splitlines() or ["no output"])[-1]
    say(f"    {summary}  ({time.monotonic() - t0:.0f}s)")
    note = f"{len(files)} file(s) here: {summary}"
    if returncode == 0:
        return note, []
    failed = [
        line for line in output.splitlines()
        if line.startswith(("FAILED ", "ERROR "))
    ]
    for line in failed:
        say(f"    {line}")
    return note, [summary + (f" ({failed[0]})" if failed else "")]


def _pytest(cwd: Path, env: dict[str, str], args: list[str],
            forks: PytestForks | None) -> tuple[int, str]:
    """`python -m pytest <args>` in `cwd`, forked from `forks` if given:
    its exit status and output."""
    if forks is None:
        proc = run_python(cwd, env, ["-m", "pytest", *args])
        return proc.returncode, proc.stdout
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "pytest.log"
        returncode = forks.submit(cwd, args, log, env).wait()
        output = log.read_text(errors="replace") if log.exists() else ""
    return returncode, output


def tests_at_tip(files: list[str],
                 covered: dict[str, str],
                 say: Callable[[str], None] = print) -> tuple[str, list[str]]:
    """The test files identical at the tip, whose outcome in make test's run
    there stands for this prefix: a note, and the files that failed."""
    note = (f"{len(files)} file(s) identical at the tip, run there by make "
            "test")
    say(f"    {len(files)} test file(s) as at the tip: result of make "
        "test's run")
    return note, [f"{f}: {covered[f]}" for f in files if covered[f] != "ok"]


def check_bisect(layout: Line,
                 skip_tests: bool = False,
                 tip_results: dict[str, str] | None = None,
                 reuse: bool = True,
                 results_file: Path | None = None,
                 at_once: Callable[[], int] = lambda: 1,
                 forks: PytestForks | None = None) -> list[PatchResult]:
    """Check every prefix. `tip_results` (test file -> outcome of make
    test's run at the tip) lets a prefix reuse the tip's run of a file it
    shares with the tip; `at_once` says, each time a prefix is to start,
    how many may be under way (each has a worktree of its own); `forks`:
    the server to fork the prefixes' pytest runs from."""
    results_file = results_file or layout.check_results
    pin = layout.pin
    src = VllmSrc(layout.src)
    commits = src.series_commits(pin)
    if not commits:
        raise UserError("the series is empty", "nothing to check")
    tip = commits[-1]
    env = test_env()
    deselect = deselected()
    key = env_key()
    known = {
        r.tree: r
        for r in load_results(results_file) if r.env == key and r.complete
    }
    results: list[PatchResult | None] = [None] * len(commits)
    todo: list[tuple[int, str, dict[str, str]]] = []
    for i, commit in enumerate(commits):
        record = known.get(src.tree(commit))
        if reuse and not skip_tests and record:
            results[i] = replace(record,
                                 commit=commit,
                                 reused_from=record.date,
                                 ran=f"as recorded on {record.date} for this "
                                 f"tree: {record.ran}")
            progress(f"[{i + 1}/{len(commits)}] {src.subject(commit)[:70]}")
            print(
                f"    same tree, tools and venv as the passing check of "
                f"{record.date}: not re-run",
                flush=True)
            continue
        covered = {}
        if tip_results:
            # Test files that are the same at the tip: make test ran them
            # there.
            differ = set(
                src.git("diff", "--name-only", commit, tip, "--",
                        *tip_results).split())
            covered = {f: v for f, v in tip_results.items() if f not in differ}
        todo.append((i, commit, covered))

    # The scratch worktrees, made on first use; each one checks a prefix at
    # a time.
    free_trees: list[GitRepo] = []
    made = 0

    def check(i: int, commit: str, covered: dict[str, str],
              tree: GitRepo) -> tuple[PatchResult, list[str]]:
        lines: list[str] = []
        result = check_patch(tree, commit, env, skip_tests, deselect, covered,
                             lines.append, forks)
        result.env = key
        return result, lines

    in_flight: dict[Future, tuple[int, GitRepo]] = {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        while todo or in_flight:
            if todo and len(in_flight) < max(1, min(2, at_once())):
                i, commit, covered = todo.pop(0)
                if not free_trees:
                    made += 1
                    name = "bisect" if made == 1 else f"bisect-{made}"
                    free_trees.append(
                        src.scratch_worktree(layout.build / name, SERIES))
                tree = free_trees.pop()
                progress(f"[{i + 1}/{len(commits)}] started: "
                         f"{src.subject(commit)[:70]}")
                in_flight[pool.submit(check, i, commit, covered,
                                      tree)] = (i, tree)
                continue
            done, _ = wait(in_flight, timeout=2, return_when=FIRST_COMPLETED)
            for future in done:
                i, tree = in_flight.pop(future)
                free_trees.append(tree)
                result, lines = future.result()
                results[i] = result
                beside = (f"; {len(in_flight)} other(s) under way"
                          if in_flight else "")
                progress(f"[{i + 1}/{len(commits)}] "
                         f"{src.subject(commits[i])[:70]}  "
                         f"({result.seconds:.0f}s{beside})")
                if lines:
                    print("\n".join(lines), flush=True)
    checked = [r for r in results if r is not None]
    assert len(checked) == len(commits)
    if not skip_tests:  # reused records stay as they were
        save_results(results_file, [r for r in checked if not r.reused_from])
    return checked


def print_report(results: list[PatchResult]) -> None:
    checks = list(results[0].checks)
    print("\n" + " | ".join(["#", "patch", *checks, "tests ran", "s"]))
    for i, r in enumerate(results, 1):
        print(" | ".join([
            str(i), r.subject[:60], *(r.checks.get(c, "-") for c in checks),
            r.ran, f"{r.seconds:.0f}"
        ]))
