"""The linters vLLM's pre-commit runs on Python: check-bisect runs them on
the files a patch touches, `make test` on the project's own Python. Which
ones depends on the tree (linters_for): vLLM 0.9.2 and 0.10.2 format with
yapf and sort imports with isort, later releases format with ruff. Each
finds its settings from the file's directory up: the base's pyproject.toml
in vllm-src, the project's at the root."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

LINTERS = {
    "ruff": ["-m", "ruff", "check", "--quiet"],
    "yapf": ["-m", "yapf", "--diff"],
    "isort": ["-m", "isort", "--check-only", "--quiet"],
    "ruff-format": ["-m", "ruff", "format", "--check", "--quiet"],
}
# Formatting as vLLM's pre-commit did before and after it moved to ruff's.
YAPF_ERA = ("ruff", "yapf", "isort")
RUFF_ERA = ("ruff", "ruff-format")


def linters_for(tree: Path) -> tuple[str, ...]:
    """The linters of the tree's .pre-commit-config.yaml (the project's own
    tree has none: it is linted as vLLM 0.9.2 is)."""
    config = tree / ".pre-commit-config.yaml"
    if config.exists() and "id: yapf" not in config.read_text():
        return RUFF_ERA
    return YAPF_ERA


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
         env: dict[str, str] | None = None,
         python: Path | str = sys.executable) -> LintResult:
    """`linter` on `files`, with the `python` whose venv has it."""
    if not files:
        return LintResult(linter, "ok")
    proc = subprocess.run([str(python), *LINTERS[linter], *files],
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
        line.removeprefix("Would reformat: ").split(":")[0]
        for line in proc.stdout.splitlines()
        if line.endswith(".py") or ".py:" in line
    })
    return LintResult(linter,
                      "issues in " + ", ".join(named[:3] or ["output"]),
                      proc.stdout)
