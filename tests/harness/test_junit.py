"""`make test`'s counts, read from pytest's JUnit XML files."""

from __future__ import annotations

from pstack.harness.junit import Counts, junit_by_file, junit_counts

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites>
  <testsuite name="pytest" errors="1" failures="1" skipped="1" tests="5">
    <testcase classname="tests.test_a" name="test_ok"/>
    <testcase classname="tests.test_a" name="test_skipped">
      <skipped message="no GPU"/>
    </testcase>
    <testcase classname="tests.test_b" name="test_fails">
      <failure message="assert 1 == 2"/>
    </testcase>
    <testcase classname="tests.test_b.TestC" name="test_errors">
      <error message="fixture"/>
    </testcase>
    <testcase classname="tests.test_b" name="test_ok"/>
  </testsuite>
</testsuites>
"""


def test_junit_counts_errors_as_failures(tmp_path):
    junit = tmp_path / "run.xml"
    junit.write_text(JUNIT)
    assert junit_counts(junit) == Counts(passed=2, failed=2, skipped=1)


def test_a_missing_junit_file_counts_nothing(tmp_path):
    assert junit_counts(tmp_path / "never-written.xml") == Counts()


def test_outcome_per_test_file(tmp_path):
    junit = tmp_path / "run.xml"
    junit.write_text(JUNIT)
    files = ["tests/test_a.py", "tests/test_b.py", "tests/test_c.py"]
    assert junit_by_file(junit, files) == {
        "tests/test_a.py": "ok",
        "tests/test_b.py": "2 failed",
        "tests/test_c.py": "not run",
    }
    assert junit_by_file(tmp_path / "missing.xml", files[:1]) == {
        "tests/test_a.py": "not run"
    }


def test_the_total_line_reads_back():
    counts = Counts(passed=7, failed=0, skipped=3)
    assert Counts.from_total_line(counts.total_line()) == counts
