"""`make test`: the project's own Python linted, its tests, then the vLLM
test files the series touches, on every line of the checkout.

The tests run under the project venv with the offline switches set. Then
check-bisect checks every prefix of the series (see check_bisect.py),
reusing the tip run for test files a prefix shares with the tip. Each
linter and each prefix counts as one test.

A line whose series changes upstream's code rather than adding its own
also runs upstream's tests of that code (ci/vllm-suites-<version>.txt).
check-bisect runs on the default and the newest line (bisects()).

The project's tests (tests/, the lm-eval gate among them) run once, on the
default line. Each other line of the checkout (patches-<version>/) is set up
first if needed and runs its own part in its own venv, alongside the default
line's: its vLLM test files at its tip, the lm-eval gate on its vLLM, and
check-bisect over its series, the lines' check-bisect runs taking turns
(`make test LINE=<version>` runs only that part). The final line sums it
all up ("total: N passed, N failed, N skipped"). PSTACK_NO_BISECT=1 leaves
check-bisect out; extra arguments (ARGS=...) are for pytest and run the
project's tests only.

This module orchestrates the run; the counts and the JUnit files they are
read from are in junit.py, the other lines' processes in other_lines.py.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..core.errors import UserError, progress
from ..core.layout import REPO, Layout
from ..core.lint import lint, linters_for
from ..core.pin import BasePin, release_order
from ..core.vllm_src import SERIES, VllmSrc
from .check_bisect import check_bisect, print_report
from .junit import Counts, junit_by_file, junit_counts
from .other_lines import (finish_other_line, one_bisect_at_a_time, other_lines,
                          prepare_line, pstack_env, start_other_line,
                          stop_other_lines)
from .testenv import deselected, test_env

# The project's own Python, linted with the settings in pyproject.toml.
OWN_CODE = ("scripts", "tests")
# A vLLM test file that builds engines in the pytest process (or imports
# another test file's helpers, which do).
IN_PROCESS_ENGINES = re.compile(
    r"\bLLM\(|VLLM_ENABLE_V1_MULTIPROCESSING|^from \.test_\w+ import",
    re.MULTILINE)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pytest_args",
                        nargs="*",
                        help="for pytest: run (some of) the project's tests "
                        "only; pass them after --")


def run(args: argparse.Namespace, layout: Layout) -> int:
    if layout.is_default_line:
        return run_all(layout, args.pytest_args)
    if args.pytest_args:
        raise UserError(
            "ARGS= selects the project's tests, which run on the default "
            "line", "make test ARGS=... without LINE=")
    start = time.monotonic()
    return finish(run_line(layout), [0], start)


def touched_vllm_tests(layout: Layout) -> list[str]:
    """Test files under the line's vllm-src/tests that its series adds or
    modifies."""
    pin = BasePin.load(layout.base_file)
    out = VllmSrc(layout.src).git("diff", "--name-only", "--diff-filter=AM",
                                  pin.tag, SERIES, "--", "tests/")
    return [p for p in out.split() if _is_test_file(p)]


def _is_test_file(path: str) -> bool:
    return Path(path).name.startswith("test_") and path.endswith(".py")


def suites_file(version: str) -> Path:
    """The upstream test suites a line runs besides the test files of its
    series (ci/vllm-suites-<version>.txt; no file: none)."""
    return REPO / "ci" / f"vllm-suites-{version}.txt"


def upstream_suite_tests(layout: Layout) -> list[str]:
    """The test files of the upstream suites the line's suites file names,
    in its vllm-src: each path a file, or a directory of `test_*.py`."""
    version = BasePin.load(layout.base_file).version
    listed = suites_file(version)
    if not listed.exists():
        return []
    files = []
    for line in listed.read_text().splitlines():
        entry = line.split("#", 1)[0].strip()
        if not entry:
            continue
        path = layout.src / entry
        if path.is_dir():
            files += sorted(
                p.relative_to(layout.src).as_posix()
                for p in path.rglob("test_*.py"))
        elif path.is_file() and _is_test_file(entry):
            files.append(entry)
        else:
            raise UserError(
                f"{listed.name} names {entry}, which is no test file or "
                f"directory in {layout.src.name}", f"correct {listed}")
    return files


def _pytest(args: list[str], cwd: Path, junit: Path, env: dict[str,
                                                               str]) -> int:
    cmd = [sys.executable, "-m", "pytest", f"--junitxml={junit}", *args]
    progress(" ".join(cmd[2:]) + f"   (in {cwd})")
    return subprocess.run(cmd, cwd=cwd, env={**os.environ, **env}).returncode


def lint_own_code() -> Counts:
    """ruff, yapf and isort on scripts/ and tests/: one test each."""
    files = sorted(
        str(p.relative_to(REPO)) for d in OWN_CODE
        for p in (REPO / d).rglob("*.py"))
    counts = Counts()
    for linter in linters_for(REPO):
        result = lint(linter, files, REPO)
        progress(f"lint {linter}: {result.summary}")
        if not result.ok:
            print(result.output.rstrip()[-3000:])
        counts += Counts(passed=int(result.ok), failed=int(not result.ok))
    return counts


def _bisect(layout: Layout, tip_results: dict[str, str]) -> Counts:
    """check-bisect over the series, reusing the tip run above; counts per
    prefix."""
    assert layout.root is not None
    with one_bisect_at_a_time(layout.root):
        progress("check-bisect: every prefix of the series compiles, lints "
                 "and passes its tests (files identical at the tip: the run "
                 "above)")
        return _bisect_now(layout, tip_results)


def _bisect_now(layout: Layout, tip_results: dict[str, str]) -> Counts:
    start = time.monotonic()
    try:
        results = check_bisect(layout, tip_results=tip_results)
    except UserError as e:
        print(f"error: check-bisect: {e}")
        return Counts(failed=1)
    print_report(results)
    bad = [r for r in results if not r.ok]
    print(f"check-bisect: {len(results) - len(bad)} of {len(results)} "
          f"prefixes pass ({time.monotonic() - start:.0f}s)")
    return Counts(passed=len(results) - len(bad), failed=len(bad))


def pytest_batches(src: Path, files: list[str]) -> list[list[str]]:
    """The test files in pytest runs: one for most, one each for the files
    that build engines in the pytest process, so that what such a file's
    engines leave in their process ends with that process: process-wide
    state such as the worker-side connector, and the memory of every engine
    it built wherever a version of the series does not free an engine's KV
    cache and CPU tier when it shuts down."""
    alone = [
        f for f in files
        if IN_PROCESS_ENGINES.search((src / f).read_text(errors="replace"))
    ]
    rest = [f for f in files if f not in alone]
    return ([rest] if rest else []) + [[f] for f in alone]


def vllm_tests_at_tip(layout: Layout, tmp: Path,
                      env: dict[str, str]) -> tuple[Counts, dict[str, str]]:
    """The vLLM test files the line touches and its upstream suites, at its
    tip: counts, and the outcome per file (check-bisect reuses it)."""
    touched = touched_vllm_tests(layout)
    suites = [f for f in upstream_suite_tests(layout) if f not in touched]
    if suites:
        progress(
            f"{layout.src.name}: {len(touched)} test files of the "
            f"series and {len(suites)} of upstream's suites "
            f"({suites_file(BasePin.load(layout.base_file).version).name})")
    vllm_tests = touched + suites
    counts: Counts = Counts()
    by_file: dict[str, str] = {}
    start = time.monotonic()
    skip = [f"--deselect={node}" for node in deselected()]
    for i, files in enumerate(pytest_batches(layout.src, vllm_tests)):
        junit = tmp / f"vllm-{i}.xml"
        rc = _pytest(["-p", "no:cacheprovider", *skip, *files], layout.src,
                     junit, env)
        batch = junit_counts(junit)
        if rc not in (0, 5) and not batch.failed:
            batch += Counts(failed=1)  # pytest itself failed (collection...)
        counts += batch
        by_file.update(junit_by_file(junit, files))
    if vllm_tests:
        progress(f"vLLM tests at the tip of {layout.src.name} done "
                 f"({time.monotonic() - start:.0f}s)")
    return counts, by_file


def lm_eval_gate(layout: Layout) -> Counts:
    """The lm-eval gate on this line's vLLM (`make lm-eval LINE=...`): one
    test. The default line's runs among the project's tests."""
    version = BasePin.load(layout.base_file).version
    progress(f"lm-eval gate on vLLM {version}")
    proc = subprocess.run([sys.executable, "-m", "pstack", "lm-eval"],
                          cwd=REPO,
                          env=pstack_env(version))
    return Counts(passed=int(proc.returncode == 0),
                  failed=int(proc.returncode != 0))


def run_line(layout: Layout) -> Counts:
    """A line's own part of the run, in its venv (this process): its vLLM
    tests at the tip, the lm-eval gate, check-bisect if it bisects."""
    env = test_env()
    with tempfile.TemporaryDirectory() as tmp:
        total, tip_results = vllm_tests_at_tip(layout, Path(tmp), env)
    total += lm_eval_gate(layout)
    if os.environ.get("PSTACK_NO_BISECT") == "1":
        return total
    if bisects(layout):
        total += _bisect(layout, tip_results)
    else:
        progress(f"check-bisect: not in `make test` for {layout.patches.name}/"
                 " (a line between the default and the newest one; `make "
                 "check-bisect LINE=<version>` checks its prefixes)")
    return total


def bisects(layout: Layout) -> bool:
    """Whether `make test` checks every prefix of the line: the default
    line's patches are the series and the newest line's are what upstream
    still lacks, both sent upstream patch by patch; a line in between is
    the default line carried for those who run that release, tested at its
    tip (its prefixes' patches are checked on the default line)."""
    if layout.is_default_line:
        return True
    versions = [version for version, _ in layout.default_line().lines()]
    newest = max(versions, key=release_order)
    return BasePin.load(layout.base_file).version == newest


def finish(total: Counts, returncodes: list[int], start: float) -> int:
    """Print the run's time and total line; the exit status: 1 if anything
    failed or nothing passed."""
    # pytest's 5 means "no tests collected": only acceptable for a filtered
    # run.
    failed = (any(rc not in (0, 5) for rc in returncodes) or total.passed == 0
              or total.failed)
    print(f"make test took {time.monotonic() - start:.0f}s")
    print(total.total_line())
    return 1 if failed else 0


def run_all(layout: Layout, pytest_args: list[str]) -> int:
    env = test_env()
    # A filtered run (ARGS=...) is for the project's tests only.
    everything = not pytest_args
    total = Counts()
    returncodes = []
    start = time.monotonic()
    lines = other_lines(layout) if everything else []
    ready = [line for line in lines if prepare_line(line)]
    total += Counts(failed=len(lines) - len(ready))
    if everything:
        total += lint_own_code()
    parts = [start_other_line(line) for line in ready]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            junit = Path(tmp) / "project.xml"
            returncodes.append(
                _pytest(["tests", *pytest_args], REPO, junit, env))
            total += junit_counts(junit)
            progress(f"project tests done ({time.monotonic() - start:.0f}s)")
            if not everything:
                return finish(total, returncodes, start)
            counts, tip_results = vllm_tests_at_tip(layout, Path(tmp), env)
            total += counts
        if os.environ.get("PSTACK_NO_BISECT") != "1":
            total += _bisect(layout, tip_results)
        for part in parts:
            total += finish_other_line(part)
    finally:
        # Interrupted, or failed in this line's part: the other lines' parts
        # stop with it.
        stop_other_lines(parts)
    return finish(total, returncodes, start)
