"""`make test`: the project's own Python linted, its tests, then the vLLM
test files the series touches, on every line of the checkout.

The tests run under the project venv with the offline switches set. Then
check-bisect checks every prefix of the series (see check_bisect.py),
reusing the tip run for test files a prefix shares with the tip. Each
linter and each prefix counts as one test.

The project's tests (tests/, the lm-eval gate among them) run once, on the
default line. Each other line of the checkout (patches-<version>/) is set up
first if needed and runs its own part in its own venv, alongside the default
line's: its vLLM test files at its tip, the lm-eval gate on its vLLM, and
check-bisect over its series, the lines' check-bisect runs taking turns
(`make test LINE=<version>` runs only that part). The final line sums it
all up ("total: N passed, N failed, N skipped"). PSTACK_NO_BISECT=1 leaves
check-bisect out; extra arguments (ARGS=...) are for pytest and run the
project's tests only.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..build.setup_env import setup
from ..core.download import fetch_sdist, fetch_wheel
from ..core.errors import UserError, progress
from ..core.layout import REPO, Layout
from ..core.pin import BasePin
from ..core.vllm_src import SERIES, VllmSrc
from ..queue.sync import sync
from .check_bisect import check_bisect, print_report
from .lint import LINTERS, lint
from .testenv import deselected, test_env

# The project's own Python, linted with the settings in pyproject.toml.
OWN_CODE = ("scripts", "tests")
# A vLLM test file that builds engines in the pytest process (or imports
# another test file's helpers, which do).
IN_PROCESS_ENGINES = re.compile(
    r"\bLLM\(|VLLM_ENABLE_V1_MULTIPROCESSING|^from \.test_\w+ import",
    re.MULTILINE)
# The last line of every run.
TOTAL = re.compile(r"^total: (\d+) passed, (\d+) failed, (\d+) skipped$")


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


@contextmanager
def one_bisect_at_a_time(root: Path) -> Iterator[None]:
    """check-bisect of one line at a time in the checkout at `root`, while
    the lines' other parts run side by side. Up to the series' patch that
    frees the CPU tier with its engine (near the end), a prefix's pytest
    process keeps the CPU tier of every engine it builds: one reached 12 GB,
    and two of them, one per line, do not fit in 24 GiB."""
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
    that build engines in the pytest process. What such a file's engines
    leave in their process (process-wide state such as the worker-side
    connector, and memory if a version of the series leaks it again: before
    its two patches that free the KV cache and the CPU tier with their
    engine, one process of them reached 17 GiB) ends with that process."""
    alone = [
        f for f in files
        if IN_PROCESS_ENGINES.search((src / f).read_text(errors="replace"))
    ]
    rest = [f for f in files if f not in alone]
    return ([rest] if rest else []) + [[f] for f in alone]


def vllm_tests_at_tip(layout: Layout, tmp: Path,
                      env: dict[str, str]) -> tuple[Counts, dict[str, str]]:
    """The vLLM test files the line touches, at its tip: counts, and the
    outcome per file (check-bisect reuses it)."""
    vllm_tests = touched_vllm_tests(layout)
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


def pstack_env(version: str) -> dict[str, str]:
    """The environment of a `pstack` command run on the line of `version`."""
    return {
        **os.environ, "PSTACK_LINE": version,
        "PYTHONPATH": str(REPO / "scripts")
    }


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
    tests at the tip, the lm-eval gate, check-bisect."""
    env = test_env()
    with tempfile.TemporaryDirectory() as tmp:
        total, tip_results = vllm_tests_at_tip(layout, Path(tmp), env)
    total += lm_eval_gate(layout)
    if os.environ.get("PSTACK_NO_BISECT") != "1":
        total += _bisect(layout, tip_results)
    return total


def other_lines(layout: Layout) -> list[Layout]:
    """The checkout's lines besides the default one."""
    return [
        layout.line(patches.name.removeprefix("patches-"))
        for _, patches in layout.lines()[1:]
    ]


def prepare_line(line: Layout) -> bool:
    """Another line's tree, pinned files and venv, before anything runs (the
    project's tests build its wheels too)."""
    pin = BasePin.load(line.base_file)
    version = pin.version
    progress(f"line {line.patches.name}/ (vLLM {version}): setting it up")
    try:
        fetch_sdist(pin, line.cache)
        fetch_wheel(pin, line.cache)
        sync(line)
        setup(line)
    except UserError as e:
        print(f"error: line {version}: {e}")
        return False
    return True


@dataclass
class LinePart:
    """Another line's part of the run, under way in a process of its own."""

    line: Layout
    version: str
    proc: subprocess.Popen
    log: Path


def start_other_line(line: Layout) -> LinePart:
    """Start another line's part of the run in its own venv: its vLLM tests
    at the tip, the lm-eval gate on it and check-bisect over its prefixes.

    It runs alongside the default line's part. Each part keeps about one of
    two cores busy (engines run one OpenMP thread, and much of a test is
    waiting on engine processes and servers), so side by side they take
    little longer than the longer one alone. That fits in memory because an
    engine frees its KV cache and CPU tier when it shuts down (the series'
    two [Bugfix] patches that free them); before, a pytest process kept
    1 GiB per engine it had built. The lines' check-bisect runs still take
    turns (one_bisect_at_a_time). Its output goes to out/<version>/
    make-test.log and is shown once it ends."""
    version = BasePin.load(line.base_file).version
    line.out.mkdir(parents=True, exist_ok=True)
    log = line.out / "make-test.log"
    progress(f"line {line.patches.name}/ (vLLM {version}): its vLLM tests, "
             f"lm-eval gate and check-bisect, in {line.venv.name}, alongside "
             f"this line's; output in {log} (shown when it ends)")
    with log.open("w") as kept:
        proc = subprocess.Popen(
            [str(line.venv_python), "-m", "pstack", "test"],
            cwd=REPO,
            env=pstack_env(version),
            stdout=kept,
            stderr=subprocess.STDOUT,
            # A group of its own, so that it can be stopped with its pytest
            # processes and engines.
            start_new_session=True)
    return LinePart(line, version, proc, log)


def finish_other_line(part: LinePart) -> Counts:
    """Wait for another line's part, show its output; its counts, from its
    last line."""
    returncode = part.proc.wait()
    # Its own time is in its output ("make test took ..."): it may have
    # ended long before this line's part did.
    progress(f"line {part.line.patches.name}/ (vLLM {part.version}) "
             f"ended; its output, from {part.log}:")
    counts = None
    for text in part.log.read_text(errors="replace").splitlines():
        print(text)
        m = TOTAL.match(text.strip())
        if m:
            counts = Counts(*map(int, m.groups()))
    if returncode != 0 and (counts is None or not counts.failed):
        counts = (counts or Counts()) + Counts(failed=1)
    counts = counts or Counts(failed=1)
    print(f"line {part.line.patches.name}/: {counts.passed} passed, "
          f"{counts.failed} failed, {counts.skipped} skipped")
    return counts


def finish(total: Counts, returncodes: list[int], start: float) -> int:
    # pytest's 5 means "no tests collected": only acceptable for a filtered
    # run.
    failed = (any(rc not in (0, 5) for rc in returncodes) or total.passed == 0
              or total.failed)
    print(f"make test took {time.monotonic() - start:.0f}s")
    print(f"total: {total.passed} passed, {total.failed} failed, "
          f"{total.skipped} skipped")
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
        for part in parts:
            if part.proc.poll() is None:
                os.killpg(part.proc.pid, signal.SIGTERM)
                part.proc.wait()
    return finish(total, returncodes, start)
