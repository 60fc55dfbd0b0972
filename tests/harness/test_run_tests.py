"""`make test`: the split of a line's vLLM test files into pytest runs, and
the run's exit status and total line (the other lines' parts:
test_line_parts.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import overlaps, write_base_pin, write_lines
from pstack.core.errors import UserError
from pstack.core.line import Line
from pstack.harness import run_tests
from pstack.harness.junit import Counts
from pstack.harness.line_parts import checked_at_tip, lines_checked_at_tip
from pstack.harness.run_tests import (finish, pytest_batches, setup_order,
                                      upstream_suite_tests, vllm_tests_at_tip)
from pstack.harness.running_parts import running


def test_files_with_in_process_engines_run_in_a_process_of_their_own(tmp_path):
    files = {
        "tests/test_unit.py":
        "def test_a():\n    pass\n",
        "tests/test_engine.py":
        "llm = LLM(model=MODEL)\n",
        "tests/test_env.py":
        'setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")\n',
        "tests/test_helpers_of_another.py":
        "from .test_engine import make_llm\n",
        "tests/test_other_unit.py":
        "from vllm import LLM  # a type only\n",
        "tests/test_fixture.py":
        'pytestmark = pytest.mark.usefixtures("in_process_engine")\n',
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert pytest_batches(tmp_path, list(files)) == [
        ["tests/test_unit.py", "tests/test_other_unit.py"],
        ["tests/test_engine.py"],
        ["tests/test_env.py"],
        ["tests/test_helpers_of_another.py"],
        ["tests/test_fixture.py"],
    ]


def test_finish_prints_the_total_and_fails_on_a_failure(capsys):
    start = time.monotonic()
    assert finish(Counts(passed=3, skipped=1), [0], start) == 0
    assert finish(Counts(passed=3, failed=1), [0], start) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "total: 3 passed, 0 failed, 1 skipped"
    assert out[3] == "total: 3 passed, 1 failed, 0 skipped"


def test_finish_fails_if_nothing_passed_or_pytest_failed(capsys):
    start = time.monotonic()
    assert finish(Counts(skipped=2), [0], start) == 1
    assert finish(Counts(passed=2), [2], start) == 1
    # pytest's 5: nothing collected, as a filtered run may.
    assert finish(Counts(passed=2), [5], start) == 0


def test_upstream_suites_expand_to_their_test_files(tmp_path, monkeypatch):
    layout = Line.at(tmp_path, "0.0.1", tmp_path / "cache")
    layout.patches.mkdir(parents=True)
    write_base_pin(layout.base_file, "0.0.1")
    for name in ("tests/suite/test_b.py", "tests/suite/sub/test_a.py",
                 "tests/suite/utils.py", "tests/test_alone.py"):
        (layout.src / name).parent.mkdir(parents=True, exist_ok=True)
        (layout.src / name).write_text("")
    listed = tmp_path / "vllm-suites-0.0.1.txt"
    monkeypatch.setattr(run_tests, "suites_file", lambda version: listed)
    assert upstream_suite_tests(layout) == []
    listed.write_text(
        "# the suites\ntests/suite\n\ntests/test_alone.py  # one\n")
    assert upstream_suite_tests(layout) == [
        "tests/suite/sub/test_a.py", "tests/suite/test_b.py",
        "tests/test_alone.py"
    ]
    listed.write_text("tests/gone\n")
    with pytest.raises(UserError, match="names tests/gone"):
        upstream_suite_tests(layout)


def test_the_oldest_and_the_newest_line_are_tested_at_their_tip(tmp_path):
    write_lines(tmp_path, {"0.9.2": False, "0.10.2": True, "0.32.0": True})
    oldest = Line.at(tmp_path, "0.9.2", tmp_path / "cache")
    assert [
        checked_at_tip(oldest.line(v)) for v in ("0.9.2", "0.10.2", "0.32.0")
    ] == [True, False, True]
    checked = lines_checked_at_tip(oldest)
    assert [line.version for line in checked] == ["0.9.2", "0.32.0"]


def test_a_line_without_a_runtime_is_checked_beside_the_newest_with_one(
        tmp_path):
    write_lines(tmp_path, {
        "0.9.2": False,
        "0.10.2": True,
        "0.32.0": True,
        "0.33.0": False
    })
    oldest = Line.at(tmp_path, "0.9.2", tmp_path / "cache")
    checked = lines_checked_at_tip(oldest)
    assert [line.version for line in checked] == ["0.9.2", "0.32.0", "0.33.0"]


def test_a_line_without_a_runtime_starts_first_then_the_newest_with_one(
        tmp_path):
    # The newest line's part is the run's longest; the oldest line's setup
    # (its CPU extension built from source) runs beside it. A line without
    # a runtime needs no setup of the others: its part starts before all,
    # beside the newest line's setup.
    write_lines(tmp_path, {
        "0.9.2": False,
        "0.10.2": True,
        "0.32.0": True,
        "0.33.0": False
    })
    oldest = Line.at(tmp_path, "0.9.2", tmp_path / "cache")
    order = setup_order(lines_checked_at_tip(oldest))
    assert [line.version for line in order] == ["0.33.0", "0.32.0", "0.9.2"]


def _line_of_three_batches(tmp_path, monkeypatch) -> tuple[Line, Path]:
    """A line whose vLLM tests are three pytest batches (a unit test file,
    two files that build engines in-process) of one test each that records
    when it ran."""
    root = tmp_path / "checkout"
    layout = Line.at(root, "0.10.2", tmp_path / "cache")
    record = tmp_path / "ran.txt"
    test = ("import time\n"
            "def test_it():\n"
            "    start = time.monotonic()\n"
            "    time.sleep(1.5)\n"
            f"    with open({str(record)!r}, 'a') as f:\n"
            "        f.write(f'{start} {time.monotonic()}\\n')\n")
    files = ["tests/test_unit.py", "tests/test_e1.py", "tests/test_e2.py"]
    for name in files:
        path = layout.src / name
        path.parent.mkdir(parents=True, exist_ok=True)
        engine = "# LLM(model) in-process\n" if "_e" in name else ""
        path.write_text(engine + test)
    monkeypatch.setattr(run_tests, "touched_vllm_tests", lambda line: files)
    monkeypatch.setattr(run_tests, "upstream_suite_tests", lambda line: [])
    monkeypatch.setattr(run_tests, "deselected", lambda: [])
    return layout, record


def test_the_last_part_running_runs_two_batches_at_once(
        tmp_path, monkeypatch, capsys):
    layout, record = _line_of_three_batches(tmp_path, monkeypatch)
    counts, by_file = vllm_tests_at_tip(layout, tmp_path, {})
    assert counts == Counts(passed=3)
    assert set(by_file) == {
        "tests/test_unit.py", "tests/test_e1.py", "tests/test_e2.py"
    }
    assert overlaps(record) >= 1
    # Each batch's output is shown whole.
    assert capsys.readouterr().out.count("1 passed") == 3


def test_a_part_beside_others_runs_one_batch_at_a_time(tmp_path, monkeypatch):
    layout, record = _line_of_three_batches(tmp_path, monkeypatch)
    with running(layout.root, "0.9.2"):  # alive: this process
        counts, _ = vllm_tests_at_tip(layout, tmp_path, {})
    assert counts == Counts(passed=3)
    assert overlaps(record) == 0


def _line_after_its_tip_tests(tmp_path, monkeypatch) -> tuple[Line, list]:
    """A line whose tip tests are done (one passed): what runs next, in
    order, is recorded."""
    layout = Line.at(tmp_path / "checkout", "0.10.2", tmp_path / "cache")
    ran: list = []
    monkeypatch.setattr(run_tests, "test_env", lambda: {})

    def tip_tests(*args):
        return Counts(passed=1), {"tests/test_a.py": "ok"}

    monkeypatch.setattr(run_tests, "vllm_tests_at_tip", tip_tests)
    monkeypatch.setattr(run_tests, "checked_at_tip", lambda line: True)
    monkeypatch.delenv("PSTACK_NO_BISECT", raising=False)

    def gate(line):
        ran.append("gate")
        return Counts(passed=1)

    class Beside:

        @classmethod
        def start(cls, line):
            ran.append("gate started")
            return cls()

        def running(self):
            return False

        def finish(self):
            ran.append("gate finished")
            return Counts(passed=1)

    def bisect(line, tip_results, gate=None, forks=None):
        ran.append(("bisect", "beside the gate" if gate else "alone"))
        return Counts(passed=2)

    monkeypatch.setattr(run_tests, "lm_eval_gate", gate)
    monkeypatch.setattr(run_tests, "_GateBeside", Beside)
    monkeypatch.setattr(run_tests, "_bisect", bisect)
    return layout, ran


def test_the_last_part_running_runs_its_gate_beside_check_bisect(
        tmp_path, monkeypatch):
    layout, ran = _line_after_its_tip_tests(tmp_path, monkeypatch)
    assert run_tests._run_line(layout) == Counts(passed=4)
    assert ran == [
        "gate started", ("bisect", "beside the gate"), "gate finished"
    ]


def test_a_part_beside_others_runs_its_gate_then_check_bisect(
        tmp_path, monkeypatch):
    layout, ran = _line_after_its_tip_tests(tmp_path, monkeypatch)
    with running(layout.root, "0.9.2"):  # alive: this process
        assert run_tests._run_line(layout) == Counts(passed=4)
    assert ran == ["gate", ("bisect", "alone")]
