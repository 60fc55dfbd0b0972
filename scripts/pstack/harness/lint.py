"""The linters vLLM's pre-commit runs (ruff, yapf, isort): check-bisect
runs them on the files a patch touches, `make test` on the project's own
Python. Each finds its settings from the file's directory up: the base's
pyproject.toml in vllm-src, the project's at the root."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

LINTERS = {
    "ruff": ["-m", "ruff", "check", "--quiet"],
    "yapf": ["-m", "yapf", "--diff"],
    "isort": ["-m", "isort", "--check-only", "--quiet"],
}


@dataclass(frozen=True)
class LintResult:
    linter: str
    summary: str  # "ok", or "issues in <files>"
    output: str = ""

    @property
    def ok(self) -> bool:
        return self.summary == "ok"


def lint(linter: str,
         files: list[str],
         cwd: Path,
         env: dict[str, str] | None = None) -> LintResult:
    if not files:
        return LintResult(linter, "ok")
    proc = subprocess.run([sys.executable, *LINTERS[linter], *files],
                          cwd=cwd,
                          env=env,
                          text=True,
                          stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT)
    # A diff from yapf --diff is a finding whatever its exit status.
    found = proc.returncode != 0 or (linter == "yapf" and proc.stdout.strip())
    if not found:
        return LintResult(linter, "ok")
    named = sorted({
        line.split(":")[0]
        for line in proc.stdout.splitlines()
        if line.endswith(".py") or ".py:" in line
    })
    return LintResult(linter,
                      "issues in " + ", ".join(named[:3] or ["output"]),
                      proc.stdout)
