"""`make check-bisect` on a fake series: what runs where, what is reused."""

from __future__ import annotations

import os

import pytest
from conftest import commit_change, overlaps
from pstack.harness import check_bisect
from pstack.harness.pytest_forks import PytestForks
from pstack.queue.apply import apply
from pstack.queue.export import export


@pytest.fixture
def cb(stack, monkeypatch):
    """check_bisect on the applied fake series, without vLLM's test setup
    (models, hub stand-ins, deselected tests)."""
    import pstack.harness.check_bisect as check_bisect
    monkeypatch.setattr(check_bisect, "test_env", lambda: {})
    monkeypatch.setattr(check_bisect, "deselected", lambda: [])
    apply(stack)
    return check_bisect


def test_check_bisect_reuses_the_tip_run_only_for_files_identical_there(
        stack, cb, tmp_path):
    commit_change(stack.src, "tests/test_core.py", "assert True",
                  "assert 1 + 1 == 2", "[Core] Test A")
    commit_change(stack.src, "vllm/version.py", "0.0.1", "0.0.1+b", "[Core] B")
    commit_change(stack.src, "tests/test_core.py", "def test_ok",
                  "def test_fine", "[Core] Rename the test")
    export(stack)
    results = tmp_path / "results.json"
    # From make test: the last patch's file is the tip's; the first patch's
    # is not.
    first, _, last = cb.check_bisect(
        stack,
        tip_results={"tests/test_core.py": "2 failed"},
        results_file=results)
    assert first.ran == "1 file(s) here: 1 passed in " + first.ran.split(
        " in ")[1]
    assert first.checks["tests"] == "ok"
    assert last.ran == "1 file(s) identical at the tip, run there by make test"
    assert last.checks["tests"] == "tests/test_core.py: 2 failed"
    assert last.tip_files == ["tests/test_core.py"] and not first.tip_files
    # Alone, every file runs at its prefix; a passing prefix is then not
    # re-checked.
    runs = cb.check_bisect(stack, results_file=results)
    assert all(r.ok for r in runs) and "here: 1 passed" in runs[2].ran
    again = cb.check_bisect(stack, results_file=results)
    assert again[0].ran.startswith("as recorded on ")
    assert [r.tree for r in again] == [r.tree for r in runs]
    third = cb.check_bisect(stack, results_file=results)
    assert third[0].ran == again[0].ran, "a reused record is kept as it was"


def test_check_bisect_names_the_failing_test_and_does_not_record_it_as_passing(
        stack, cb, tmp_path):
    commit_change(stack.src, "tests/test_core.py", "assert True",
                  "assert 1 == 2", "[Core] Broken test")
    export(stack)
    results = tmp_path / "results.json"
    (r, ) = cb.check_bisect(stack, results_file=results)
    assert not r.ok
    assert r.checks["tests"].startswith("1 failed")
    assert "FAILED tests/test_core.py::test_ok" in r.checks["tests"]
    (again, ) = cb.check_bisect(stack, results_file=results)
    assert not again.ran.startswith(
        "as recorded"), "failures are checked again"


def test_prefixes_forked_from_a_server_run_their_own_tests(
        stack, cb, tmp_path):
    # As make test runs them (pytest_forks.py): a failing prefix's test is
    # named, a passing one counted, each prefix's own tree's.
    commit_change(stack.src, "tests/test_core.py", "assert True",
                  "assert 1 == 2", "[Core] Broken test")
    commit_change(stack.src, "tests/test_core.py", "assert 1 == 2",
                  "assert 2 == 2", "[Core] Mended test")
    export(stack)
    with PytestForks("outside", stack.src, dict(os.environ),
                     tmp_path / "modules.txt") as forks:
        broken, mended = cb.check_bisect(stack,
                                         results_file=tmp_path / "r.json",
                                         forks=forks)
    assert "FAILED tests/test_core.py::test_ok" in broken.checks["tests"]
    assert mended.ok and "here: 1 passed" in mended.ran


def test_every_file_the_record_depends_on_exists():
    # A record is reused while these files are unchanged: one that moved
    # would no longer be hashed, and a change to it would reuse stale
    # records.
    missing = [f for f in check_bisect.ENV_INPUTS if not f.is_file()]
    assert missing == []


def _series_of_slow_tests(stack,
                          record,
                          monkeypatch,
                          seconds: float = 1.5) -> None:
    """Three patches, each changing the test file (so that each prefix runs
    it) to one that records when it ran, taking `seconds`; its code passes
    the linters, as a prefix's must."""
    monkeypatch.setenv("PSTACK_TEST_RECORD", str(record))
    slow = ("import os\n"
            "import time\n\n\n"
            "def test_ok():\n"
            "    start = time.monotonic()\n"
            f"    time.sleep({seconds})\n"
            "    with open(os.environ['PSTACK_TEST_RECORD'], 'a') as f:\n"
            "        f.write(f'{start} {time.monotonic()}\\n')\n")
    commit_change(stack.src, "tests/test_core.py",
                  "def test_ok():\n    assert True\n", "# 1\n" + slow,
                  "[Core] Slow test")
    commit_change(stack.src, "tests/test_core.py", "# 1\n", "# 2\n",
                  "[Core] Slow test, again")
    commit_change(stack.src, "tests/test_core.py", "# 2\n", "# 3\n",
                  "[Core] Slow test, a third time")
    export(stack)


def test_prefixes_run_two_at_once_when_allowed_each_shown_whole(
        stack, cb, tmp_path, capsys, monkeypatch):
    record = tmp_path / "ran.txt"
    # Long enough that two prefixes started together overlap even when a
    # loaded machine (make test's parts beside) staggers their linters.
    _series_of_slow_tests(stack, record, monkeypatch, seconds=5)
    results = cb.check_bisect(stack,
                              results_file=tmp_path / "results.json",
                              at_once=lambda: 2)
    assert [r.subject for r in results] == [
        "[Core] Slow test", "[Core] Slow test, again",
        "[Core] Slow test, a third time"
    ]
    assert all(r.ok for r in results), [r.checks for r in results]
    assert overlaps(record) >= 1
    # Each in a worktree of its own.
    assert (stack.build / "bisect").is_dir()
    assert (stack.build / "bisect-2").is_dir()
    out = capsys.readouterr().out
    # A prefix's lines follow its heading when it ends, not another's.
    for n in (1, 2, 3):
        assert f"[{n}/3] started: [Core] Slow test" in out
        heading = out.index(f"[{n}/3] [Core] Slow test")
        assert " passed" in out[heading:].splitlines()[1]


def test_prefixes_run_one_at_a_time_by_default(stack, cb, tmp_path,
                                               monkeypatch):
    record = tmp_path / "ran.txt"
    _series_of_slow_tests(stack, record, monkeypatch)
    results = cb.check_bisect(stack, results_file=tmp_path / "results.json")
    assert all(r.ok for r in results), [r.checks for r in results]
    assert overlaps(record) == 0
    assert not (stack.build / "bisect-2").exists()
