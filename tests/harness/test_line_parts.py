"""`make test`: the other lines' parts, run alongside the default line's in
process groups of their own, their check-bisect runs taking turns."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from pathlib import Path

from pstack.core.line import REPO, Line
from pstack.harness.junit import Counts
from pstack.harness.line_parts import (finish_line_part, one_bisect_at_a_time,
                                       start_line_part, stop_line_parts)


def line_running(tmp_path: Path, script: str) -> Line:
    """A line on vLLM 0.10.2 in tmp_path whose `pstack test` is `script`."""
    root = tmp_path / "checkout"
    line = Line.at(root, "0.10.2", tmp_path / "cache")
    line.patches.mkdir(parents=True)
    shutil.copy(REPO / "lines" / "0.10.2" / "base.toml", line.base_file)
    line.venv_python.parent.mkdir(parents=True)
    line.venv_python.write_text("#!/bin/sh\n" + script)
    line.venv_python.chmod(0o755)
    return line


def test_other_line_output_is_kept_and_shown_and_counted(tmp_path, capsys):
    line = line_running(
        tmp_path, "echo collecting; echo 'total: 4 passed, 1 failed, "
        "2 skipped'; exit 1\n")
    counts = finish_line_part(start_line_part(line))
    assert counts == Counts(passed=4, failed=1, skipped=2)
    shown = capsys.readouterr().out
    assert "collecting\ntotal: 4 passed, 1 failed, 2 skipped\n" in shown
    assert "total: 4 passed" in (line.out / "make-test.log").read_text()


def test_other_line_that_dies_without_a_total_is_a_failure(tmp_path):
    line = line_running(tmp_path, "echo 'Traceback'; exit 3\n")
    assert finish_line_part(start_line_part(line)) == Counts(failed=1)


def test_other_line_fails_if_it_exits_nonzero_with_a_clean_total(tmp_path):
    line = line_running(
        tmp_path, "echo 'total: 2 passed, 0 failed, 0 skipped'; exit 1\n")
    assert finish_line_part(start_line_part(line)) == Counts(passed=2,
                                                             failed=1)


def test_other_line_runs_in_a_process_group_of_its_own(tmp_path):
    pid_file = tmp_path / "pid"
    line = line_running(tmp_path, f"sleep 60 & echo $! > {pid_file}; wait\n")
    part = start_line_part(line)
    try:
        while not pid_file.exists() or not pid_file.read_text():
            time.sleep(0.05)
        assert os.getpgid(int(pid_file.read_text())) == part.proc.pid
    finally:
        os.killpg(part.proc.pid, signal.SIGTERM)
        part.proc.wait()


def test_one_check_bisect_at_a_time(tmp_path):
    entered = threading.Event()

    def other_line():
        with one_bisect_at_a_time(tmp_path):
            entered.set()

    with one_bisect_at_a_time(tmp_path):
        thread = threading.Thread(target=other_line)
        thread.start()
        assert not entered.wait(0.3)
    assert entered.wait(10)
    thread.join()


def test_stopping_the_other_lines_ends_their_process_groups(tmp_path):
    pid_file = tmp_path / "pid"
    line = line_running(tmp_path, f"sleep 60 & echo $! > {pid_file}; wait\n")
    part = start_line_part(line)
    while not pid_file.exists() or not pid_file.read_text():
        time.sleep(0.05)
    child = int(pid_file.read_text())
    stop_line_parts([part])
    assert part.proc.poll() is not None
    deadline = time.monotonic() + 10
    while alive(child):
        assert time.monotonic() < deadline, f"{child} outlived its line"
        time.sleep(0.05)


def alive(pid: int) -> bool:
    """Running, neither gone nor a zombie left for its new parent to reap."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"
