"""Every test file under tests/ is collected by `pytest tests`, which is
what `make test` runs: a file pytest skips (a folder named like one it
ignores by default, `build/` or `dist/`, say) is a test that never runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def files_on_disk() -> list[str]:
    """The test files under `tests`, relative to its parent."""
    return sorted(
        p.relative_to(TESTS.parent).as_posix()
        for p in TESTS.rglob("test_*.py") if "fixtures" not in p.parts)


def collected_files(tests: Path) -> list[str]:
    """The test files `pytest --collect-only tests` finds, run from the
    checkout as `make test` runs it."""
    proc = subprocess.run(
        [
            sys.executable, "-m", "pytest", "--collect-only", "-q", "-p",
            "no:cacheprovider", tests.name
        ],
        cwd=tests.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    return sorted({
        line.split("::", 1)[0]
        for line in proc.stdout.splitlines() if "::" in line
    })


def test_every_test_file_under_tests_is_collected():
    never_collected = sorted(
        set(files_on_disk()) - set(collected_files(TESTS)))
    assert never_collected == []
