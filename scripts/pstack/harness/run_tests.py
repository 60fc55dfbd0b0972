"""`make test`: the project's own Python linted, its tests, then each tested
line's part: the vLLM test files its series touches, its upstream suites,
the lm-eval gate and check-bisect.

`make test` orchestrates from the Python that runs make (standard library
only). Each line tested at its tip (line_parts.checked_at_tip: the oldest and
the newest) is set up if needed and runs its part in its own venv, in a
process of its own, with the offline switches set (`make test
LINE=<version>` runs only that part, in this process); each part starts as
soon as its line is set up, the newest line's first (setup_order). The
project's tests (tests/, the lm-eval gate's self-test among them) run once
every line is set up (they build its wheels too), in the oldest line's
venv, whose vLLM has the series' own connector, alongside the parts. A
line in between is left to `make test LINE=<version>`. A line newer than
the newest one with a CPU runtime (vLLM published no CPU build of its
release) has its series checked, not run (carried_checks.py), and says so
in one line.

A line whose series changes upstream's code rather than adding its own
also runs upstream's tests of that code (ci/vllm-suites-<version>.txt).
check-bisect (check_bisect.py) checks every prefix of a tested line's
series, reusing its tip run for test files a prefix shares with the tip;
the lines' check-bisect runs take turns. The last part running runs its
lm-eval gate beside its check-bisect, whose prefixes then go two at a
time. Each linter and each prefix counts as one test. The final line sums
it all up ("total: N passed, N failed, N skipped"). PSTACK_NO_BISECT=1
leaves check-bisect out; extra arguments (ARGS=...) are for pytest and run
the project's tests only.

This module orchestrates the run; the counts and the JUnit files they are
read from are in junit.py, the lines' processes in line_parts.py.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import UserError, progress
from ..core.line import NO_RUNTIME, REPO, Line
from ..core.lint import lint, linters_for
from ..core.proc import cpu_seconds
from ..core.vllm_src import SERIES, VllmSrc
from .carried_checks import check_carried
from .check_bisect import check_bisect, print_report
from .junit import Counts, junit_by_file, junit_counts
from .line_parts import (LinePart, checked_at_tip, finish_line_part,
                         lines_checked_at_tip, one_bisect_at_a_time,
                         prepare_line, pstack_env, start_line_part,
                         stop_line_parts)
from .pytest_forks import ForkedRun, PytestForks
from .running_parts import batches_at_once, others_running, running
from .testenv import deselected, test_env

# What pytest prints of a long run's slowest tests: where CI's time goes
# (docs/testing.md, "The budget of a CI run").
DURATIONS = "--durations=15"
# The project's own Python, linted with the settings in pyproject.toml.
OWN_CODE = ("scripts", "tests")
# A vLLM test file that builds engines in the pytest process (or imports
# another test file's helpers, which do).
# (in_process_engine: the 0.32 line's fixture for tests whose engines are
# built by a helper module, engine_utils.make_llm.)
IN_PROCESS_ENGINES = re.compile(
    r"\bLLM\(|VLLM_ENABLE_V1_MULTIPROCESSING|\bin_process_engine\b|"
    r"^from \.test_\w+ import", re.MULTILINE)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pytest_args",
                        nargs="*",
                        help="for pytest: run (some of) the project's tests "
                        "only; pass them after --")


def runs_in(args: argparse.Namespace, layout: Line) -> Line | None:
    """`make test LINE=<version>` runs in the line's venv; `make test`
    orchestrates from here and runs each part in its venv. A line without a
    CPU runtime is checked from here (carried_checks.py sets up its venv of
    linters and runs them)."""
    if layout.runtime == NO_RUNTIME:
        return None
    return layout if os.environ.get("PSTACK_LINE") else None


def run(args: argparse.Namespace, layout: Line) -> int:
    if not os.environ.get("PSTACK_LINE"):
        return run_all(layout, args.pytest_args)
    if args.pytest_args:
        raise UserError(
            "ARGS= selects the project's tests, which run in the oldest "
            "line's venv", "make test ARGS=... without LINE=")
    start = time.monotonic()
    return finish(run_line(layout), [0], start)


def touched_vllm_tests(layout: Line) -> list[str]:
    """Test files under the line's vllm-src/tests that its series adds or
    modifies."""
    pin = layout.pin
    out = VllmSrc(layout.src).git("diff", "--name-only", "--diff-filter=AM",
                                  pin.tag, SERIES, "--", "tests/")
    return [p for p in out.split() if _is_test_file(p)]


def _is_test_file(path: str) -> bool:
    return Path(path).name.startswith("test_") and path.endswith(".py")


def suites_file(version: str) -> Path:
    """The upstream test suites a line runs besides the test files of its
    series (ci/vllm-suites-<version>.txt; no file: none)."""
    return REPO / "ci" / f"vllm-suites-{version}.txt"


def upstream_suite_tests(layout: Line) -> list[str]:
    """The test files of the upstream suites the line's suites file names,
    in its vllm-src: each path a file, or a directory of `test_*.py`."""
    version = layout.version
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


def _pytest(args: list[str],
            cwd: Path,
            junit: Path,
            env: dict[str, str],
            python: Path | str = sys.executable) -> int:
    cmd = [str(python), "-m", "pytest", f"--junitxml={junit}", *args]
    progress(" ".join(cmd[2:]) + f"   (in {cwd})")
    return subprocess.run(cmd, cwd=cwd, env={**os.environ, **env}).returncode


def lint_own_code(python: Path) -> Counts:
    """ruff, yapf and isort (those of `python`'s venv) on scripts/ and
    tests/: one test each."""
    files = sorted(
        str(p.relative_to(REPO)) for d in OWN_CODE
        for p in (REPO / d).rglob("*.py"))
    counts = Counts()
    for linter in linters_for(REPO):
        result = lint(linter, files, REPO, python=python)
        progress(f"lint {linter}: {result.summary}")
        if not result.ok:
            print(result.output.rstrip()[-3000:])
        counts += Counts(passed=int(result.ok), failed=int(not result.ok))
    return counts


def _bisect(layout: Line,
            tip_results: dict[str, str],
            gate: _GateBeside | None = None,
            forks: PytestForks | None = None) -> Counts:
    """check-bisect over the series, reusing the tip run above; counts per
    prefix. Its prefixes two at a time while no other part of the run, nor
    the line's own lm-eval `gate`, is under way; their pytest runs forked
    from `forks` if given."""
    assert layout.root is not None
    root = layout.root

    def at_once() -> int:
        if gate is not None and gate.running():
            return 1
        return batches_at_once(root, layout.version)

    with one_bisect_at_a_time(root):
        progress("check-bisect: every prefix of the series compiles, lints "
                 "and passes its tests (files identical at the tip: the run "
                 "above)")
        return _bisect_now(layout, tip_results, at_once, forks)


def _bisect_now(layout: Line,
                tip_results: dict[str, str],
                at_once: Callable[[], int],
                forks: PytestForks | None = None) -> Counts:
    start = time.monotonic()
    try:
        results = check_bisect(layout,
                               tip_results=tip_results,
                               at_once=at_once,
                               forks=forks)
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


def vllm_tests_at_tip(layout: Line, tmp: Path,
                      env: dict[str, str]) -> tuple[Counts, dict[str, str]]:
    """The vLLM test files the line touches and its upstream suites, at its
    tip: counts, and the outcome per file (check-bisect reuses it). Its
    pytest batches run one at a time while other parts of the run keep the
    cores busy, two at a time once this part is the only one left
    (running_parts.py), each forked from a server that has imported the
    tip's tests/conftest.py (pytest_forks.py; it leaves the names of the
    modules it imported from outside the tree in `tmp`/modules.txt, for
    check-bisect's)."""
    touched = touched_vllm_tests(layout)
    suites = [f for f in upstream_suite_tests(layout) if f not in touched]
    if suites:
        progress(f"{layout.src.name}: {len(touched)} test files of the "
                 f"series and {len(suites)} of upstream's suites "
                 f"({suites_file(layout.version).name})")
    vllm_tests = touched + suites
    counts: Counts = Counts()
    by_file: dict[str, str] = {}
    start = time.monotonic()
    root = layout.root or REPO
    pending = list(enumerate(pytest_batches(layout.src, vllm_tests)))
    in_flight: list[_Batch] = []
    run_env = {**os.environ, **env}
    with PytestForks("tree", layout.src, run_env, tmp / MODULES) as forks:
        while pending or in_flight:
            for batch in [b for b in in_flight if b.ended()]:
                in_flight.remove(batch)
                counts += batch.finish()
                by_file.update(junit_by_file(batch.junit, batch.files))
            if pending and len(in_flight) < batches_at_once(
                    root, layout.version):
                index, files = pending.pop(0)
                in_flight.append(
                    _Batch.start(forks, layout, index, files, tmp,
                                 bool(in_flight)))
                continue
            time.sleep(2)
    if vllm_tests:
        progress(f"vLLM tests at the tip of {layout.src.name} done "
                 f"({time.monotonic() - start:.0f}s)")
    return counts, by_file


# Where vllm_tests_at_tip's server leaves the names of the modules it
# imported from outside the tree.
MODULES = "modules.txt"


@dataclass
class _Batch:
    """One pytest run of a line's vLLM test files, its output in a log of
    its own (out/<version>/batches/), shown when it ends: two may run at
    once."""

    files: list[str]
    junit: Path
    log: Path
    run: ForkedRun
    started: float

    @classmethod
    def start(cls, forks: PytestForks, layout: Line, index: int,
              files: list[str], tmp: Path, beside_another: bool) -> _Batch:
        junit = tmp / f"vllm-{index}.xml"
        log = layout.out / "batches" / f"{index}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        skip = [f"--deselect={node}" for node in deselected()]
        # The slowest tests of a batch of many files, for the run's budget.
        durations = [DURATIONS] if len(files) > 1 else []
        args = [
            f"--junitxml={junit}", "-p", "no:cacheprovider", *durations, *skip,
            *files
        ]
        beside = ", beside the batch before it" if beside_another else ""
        progress("pytest " + " ".join(args) +
                 f"   (in {layout.src}{beside}; output in {log}, shown when "
                 "it ends)")
        run = forks.submit(layout.src, args, log)
        return cls(files, junit, log, run, time.monotonic())

    def ended(self) -> bool:
        """Whether its pytest process has ended (its CPU time and its
        engines' counted)."""
        return self.run.ended()

    def finish(self) -> Counts:
        """Show its output; its counts (pytest's own failure, collection
        say, counts as one)."""
        returncode = self.run.wait()
        wall = time.monotonic() - self.started
        progress(f"pytest of {', '.join(self.files)} ended "
                 f"(exit status {returncode}; {wall:.0f}s, "
                 f"{self.run.cpu:.0f} CPU-s); its output:")
        print(self.log.read_text(errors="replace")
              if self.log.exists() else "(none: its pytest server had ended)",
              end="",
              flush=True)
        counts = junit_counts(self.junit)
        if returncode not in (0, 5) and not counts.failed:
            counts += Counts(failed=1)
        return counts


def lm_eval_gate(layout: Line) -> Counts:
    """The lm-eval gate on this line's vLLM (`make lm-eval LINE=...`): one
    test, the oldest line's included (the project's tests check the gate's
    verdicts and its self-test, not the gate on a line)."""
    progress(f"lm-eval gate on vLLM {layout.version}")
    proc = subprocess.run(GATE_COMMAND,
                          cwd=REPO,
                          env=pstack_env(layout.version))
    return gate_counts(proc.returncode)


# `make lm-eval` of the line in pstack_env's PSTACK_LINE.
GATE_COMMAND = [sys.executable, "-m", "pstack", "lm-eval"]


def gate_counts(returncode: int) -> Counts:
    """The gate counts as one test."""
    return Counts(passed=int(returncode == 0), failed=int(returncode != 0))


@dataclass
class _GateBeside:
    """The lm-eval gate in a process of its own, beside the line's
    check-bisect, its output in a log (out/<version>/lm-eval.log) shown when
    it ends."""

    proc: subprocess.Popen
    log: Path

    @classmethod
    def start(cls, layout: Line) -> _GateBeside:
        version = layout.version
        log = layout.out / "lm-eval.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        progress(f"lm-eval gate on vLLM {version}, beside check-bisect "
                 f"(output in {log}, shown when it ends)")
        with log.open("w") as out:
            proc = subprocess.Popen(GATE_COMMAND,
                                    cwd=REPO,
                                    env=pstack_env(version),
                                    stdout=out,
                                    stderr=subprocess.STDOUT)
        return cls(proc, log)

    def running(self) -> bool:
        return self.proc.poll() is None

    def finish(self) -> Counts:
        returncode = self.proc.wait()
        progress(f"lm-eval gate ended (exit status {returncode}); its output:")
        print(self.log.read_text(errors="replace"), end="", flush=True)
        return gate_counts(returncode)


def run_line(layout: Line) -> Counts:
    """A line's own part of the run, in its venv (this process): its vLLM
    tests at the tip, the lm-eval gate, check-bisect if it bisects; for a
    line without a CPU runtime, the checks of its series that need none
    (carried_checks.py)."""
    with running(layout.root or REPO, layout.version):
        return _run_line(layout)


def _run_line(layout: Line) -> Counts:
    if layout.runtime == NO_RUNTIME:
        return check_carried(layout)
    env = test_env()
    with tempfile.TemporaryDirectory() as tmp:
        total, tip_results = vllm_tests_at_tip(layout, Path(tmp), env)
        if os.environ.get("PSTACK_NO_BISECT") == "1":
            return total + lm_eval_gate(layout)
        if not checked_at_tip(layout):
            progress(f"check-bisect: not for line {layout.version} (a line "
                     "between the oldest and the newest one; `make "
                     "check-bisect LINE=<version>` checks its prefixes)")
            return total + lm_eval_gate(layout)
        # The prefixes' pytest runs, forked from a server that has imported
        # what the tip's did from outside its tree.
        run_env = {**os.environ, **env}
        with PytestForks("outside", layout.src, run_env,
                         Path(tmp) / MODULES) as forks:
            return total + _gate_and_bisect(layout, tip_results, forks)


def _gate_and_bisect(layout: Line, tip_results: dict[str, str],
                     forks: PytestForks) -> Counts:
    if others_running(layout.root or REPO, layout.version):
        # The other parts keep the cores busy: one thing at a time.
        total = lm_eval_gate(layout)
        return total + _bisect(layout, tip_results, forks=forks)
    # The last part running: the gate on one core, check-bisect's prefixes
    # on the other (two at a time once the gate has ended).
    gate = _GateBeside.start(layout)
    try:
        total = _bisect(layout, tip_results, gate, forks)
    except BaseException:
        gate.proc.kill()  # interrupted: the gate goes with the part
        raise
    return total + gate.finish()


def finish(total: Counts, returncodes: list[int], start: float) -> int:
    """Print the run's time and total line; the exit status: 1 if anything
    failed or nothing passed."""
    # pytest's 5 means "no tests collected": only acceptable for a filtered
    # run.
    failed = (any(rc not in (0, 5) for rc in returncodes) or total.passed == 0
              or total.failed)
    # CPU-s: the run's cost to the cores, which side by side parts share
    # (docs/testing.md, "The budget of a CI run").
    print(f"make test took {time.monotonic() - start:.0f}s "
          f"({cpu_seconds():.0f} CPU-s)")
    print(total.total_line())
    return 1 if failed else 0


def test_env_in(python: Path) -> dict[str, str]:
    """test_env() as `python`'s venv makes it: writing the local models
    and hub stand-ins takes the packages of a line's runtime, which the
    Python running make lacks."""
    code = ("import json; from pstack.harness.testenv import test_env; "
            "print(json.dumps(test_env()))")
    proc = subprocess.run([str(python), "-c", code],
                          env={
                              **os.environ, "PYTHONPATH": str(REPO / "scripts")
                          },
                          stdout=subprocess.PIPE,
                          text=True)
    if proc.returncode != 0:
        raise UserError(
            f"{python} could not write the local models and hub stand-ins "
            "(its error above)", "fix the cause, then `make test` again")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def setup_order(lines: list[Line]) -> list[Line]:
    """The order in which `make test` sets the lines up and starts their
    parts: those without a CPU runtime first, then those with one, newest
    first. A line without a runtime sets itself up in its part and needs
    nothing the others make, so its part starts at once, on the core that
    the setup of the first line with a runtime (one pip or git step after
    another) leaves idle. The newest line's part is the run's longest (it
    runs upstream's suites too), so it starts next, while the oldest line
    is set up beside it (its venv, and vLLM's CPU extension built from
    source: minutes); the oldest line's part and the project's tests
    follow."""
    with_runtime = [line for line in lines if line.runtime != NO_RUNTIME]
    without = [line for line in lines if line.runtime == NO_RUNTIME]
    return without + with_runtime[::-1]


def project_tests(tooling: Line, pytest_args: list[str],
                  start: float) -> tuple[Counts, int]:
    """The project's tests (tests/, or those `pytest_args` select), in the
    oldest line's venv, whose vLLM has the series' own connector (the
    lm-eval gate's): their counts and pytest's exit status."""
    env = test_env_in(tooling.venv_python)
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "project.xml"
        progress(f"the project's tests, in {tooling.venv.name}")
        cpu_before = cpu_seconds()
        returncode = _pytest(["tests", DURATIONS, *pytest_args], REPO, junit,
                             env, tooling.venv_python)
        cpu = cpu_seconds() - cpu_before
        counts = junit_counts(junit)
    progress(f"project tests done ({time.monotonic() - start:.0f}s into the "
             f"run; {cpu:.0f} CPU-s)")
    return counts, returncode


def run_all(layout: Line, pytest_args: list[str]) -> int:
    """Everything (no ARGS=): each tested line's part, lint and the
    project's tests; with ARGS=, the project's tests they select."""
    start = time.monotonic()
    tooling = layout.oldest
    if pytest_args:
        if not prepare_line(tooling):
            return finish(Counts(failed=1), [1], start)
        counts, returncode = project_tests(tooling, pytest_args, start)
        return finish(counts, [returncode], start)
    total = Counts()
    returncodes = []
    parts: list[LinePart] = []
    try:
        # Until the project's tests end, this process keeps a core busy too
        # (running_parts.py).
        with running(layout.root or REPO, "setup-and-project-tests"):
            # Each line's part starts as soon as its line is set up, beside
            # the setup of the next one: as many processes as the two cores
            # and the memory budget take (docs/testing.md).
            for line in setup_order(lines_checked_at_tip(layout)):
                # A line without a CPU runtime sets itself up in its part
                # (carried_checks.py): nothing else needs it.
                if line.runtime == NO_RUNTIME or prepare_line(line):
                    parts.append(start_line_part(line))
                else:
                    total += Counts(failed=1)
            if any(part.version == tooling.version for part in parts):
                total += lint_own_code(tooling.venv_python)
                counts, returncode = project_tests(tooling, [], start)
                total += counts
                returncodes.append(returncode)
            else:
                returncodes.append(1)  # its setup failed, said above
        for part in parts:
            total += finish_line_part(part)
    finally:
        # Interrupted, or failed: the lines' parts stop with it.
        stop_line_parts(parts)
    return finish(total, returncodes, start)
