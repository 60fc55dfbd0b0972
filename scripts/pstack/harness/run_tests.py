"""`make test`: the project's own Python linted, its tests, then the vLLM
test files the series touches.

The tests run under the project venv with the offline switches set. Then
check-bisect checks every prefix of the series (see check_bisect.py),
reusing the tip run for test files a prefix shares with the tip. Each
linter and each prefix counts as one test. The final line sums it all up
("total: N passed, N failed, N skipped"). PSTACK_NO_BISECT=1 leaves
check-bisect out; extra arguments (ARGS=...) are for pytest and run the
project's tests only.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import UserError, progress
from ..core.layout import REPO, Layout
from ..core.pin import BasePin
from ..core.vllm_src import SERIES, VllmSrc
from .check_bisect import check_bisect, print_report
from .lint import LINTERS, lint
from .testenv import deselected, test_env

# The project's own Python, linted with the settings in pyproject.toml.
OWN_CODE = ("scripts", "tests")


@dataclass(frozen=True)
class Counts:
    """Tests passed, failed and skipped in a part of the run."""

    passed: int = 0
    failed: int = 0
    skipped: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.passed + other.passed, self.failed + other.failed,
                      self.skipped + other.skipped)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pytest_args",
                        nargs="*",
                        help="for pytest: run (some of) the project's tests "
                        "only; pass them after --")


def run(args: argparse.Namespace, layout: Layout) -> int:
    return run_all(layout, args.pytest_args)


def touched_vllm_tests(layout: Layout) -> list[str]:
    """Test files under vllm-src/tests that the series adds or modifies."""
    pin = BasePin.load(layout.base_file)
    out = VllmSrc(layout.src).git("diff", "--name-only", "--diff-filter=AM",
                                  pin.tag, SERIES, "--", "tests/")
    return [
        p for p in out.split()
        if Path(p).name.startswith("test_") and p.endswith(".py")
    ]


def _pytest(args: list[str], cwd: Path, junit: Path, env: dict[str,
                                                               str]) -> int:
    cmd = [sys.executable, "-m", "pytest", f"--junitxml={junit}", *args]
    progress(" ".join(cmd[2:]) + f"   (in {cwd})")
    return subprocess.run(cmd, cwd=cwd, env={**os.environ, **env}).returncode


def junit_counts(junit: Path) -> Counts:
    counts = Counts()
    if not junit.exists():
        return counts
    for suite in ET.parse(junit).getroot().iter("testsuite"):
        tests = int(suite.get("tests", 0))
        failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        skipped = int(suite.get("skipped", 0))
        counts += Counts(tests - failed - skipped, failed, skipped)
    return counts


def junit_by_file(junit: Path, files: list[str]) -> dict[str, str]:
    """Outcome per test file of a pytest --junitxml run: 'ok', 'N failed'
    or 'not run'."""
    counts = {f: [0, 0] for f in files}  # passed-or-skipped, failed
    modules = {f: f[:-3].replace("/", ".") for f in files}
    if junit.exists():
        for case in ET.parse(junit).getroot().iter("testcase"):
            name = case.get("classname") or case.get("name") or ""
            for f, mod in modules.items():
                if name == mod or name.startswith(mod + "."):
                    bad = (case.find("failure") is not None
                           or case.find("error") is not None)
                    counts[f][1 if bad else 0] += 1
    return {
        f: ("ok" if failed == 0 and n else
            f"{failed} failed" if failed else "not run")
        for f, (n, failed) in counts.items()
    }


def lint_own_code() -> Counts:
    """ruff, yapf and isort on scripts/ and tests/: one test each."""
    files = sorted(
        str(p.relative_to(REPO)) for d in OWN_CODE
        for p in (REPO / d).rglob("*.py"))
    counts = Counts()
    for linter in LINTERS:
        result = lint(linter, files, REPO)
        progress(f"lint {linter}: {result.summary}")
        if not result.ok:
            print(result.output.rstrip()[-3000:])
        counts += Counts(passed=int(result.ok), failed=int(not result.ok))
    return counts


def _bisect(layout: Layout, tip_results: dict[str, str]) -> Counts:
    """check-bisect over the series, reusing the tip run above; counts per
    prefix."""
    progress("check-bisect: every prefix of the series compiles, lints and "
             "passes its tests (files identical at the tip: the run above)")
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


def run_all(layout: Layout, pytest_args: list[str]) -> int:
    env = test_env()
    # A filtered run (ARGS=...) is for the project's tests only.
    everything = not pytest_args
    total = Counts()
    returncodes = []
    start = time.monotonic()
    if everything:
        total += lint_own_code()
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "project.xml"
        returncodes.append(_pytest(["tests", *pytest_args], REPO, junit, env))
        total += junit_counts(junit)
        progress(f"project tests done ({time.monotonic() - start:.0f}s)")
        vllm_tests = touched_vllm_tests(layout)
        tip_results: dict[str, str] = {}
        if vllm_tests and everything:
            junit = Path(tmp) / "vllm.xml"
            skip = [f"--deselect={node}" for node in deselected()]
            returncodes.append(
                _pytest(["-p", "no:cacheprovider", *skip, *vllm_tests],
                        layout.src, junit, env))
            total += junit_counts(junit)
            tip_results = junit_by_file(junit, vllm_tests)
            progress("vLLM tests at the tip done "
                     f"({time.monotonic() - start:.0f}s)")
        if everything and os.environ.get("PSTACK_NO_BISECT") != "1":
            total += _bisect(layout, tip_results)
    # pytest's 5 means "no tests collected": only acceptable for a filtered
    # run.
    failed = (any(rc not in (0, 5) for rc in returncodes) or total.passed == 0
              or total.failed)
    print(f"make test took {time.monotonic() - start:.0f}s")
    print(f"total: {total.passed} passed, {total.failed} failed, "
          f"{total.skipped} skipped")
    return 1 if failed else 0
