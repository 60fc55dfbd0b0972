"""The hooks of a vLLM tree's .pre-commit-config.yaml that run offline,
beyond the formatters of lint.py, as `make pr` runs them on the files of a
PR: typos, mypy, the SPDX header check and the check that new tests are
wired into vLLM's Buildkite CI. Which ones depends on the tree (hooks_for);
each runs with the line's venv (its tools are installed by `make setup`).

mypy is judged against the base: vLLM's mypy hook runs with the stubs and
pydantic of its own environment, and here some files already report errors
at the release (a few hundred in gpu_model_runner.py); a PR fails mypy only
if it adds errors to the files it touches.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .lint import LintResult

# hook id in .pre-commit-config.yaml -> what it needs in the tree.
HOOK_SCRIPTS = {
    "typos": None,
    "mypy": "tools/pre_commit/mypy.py",
    "check-spdx-header": "tools/pre_commit/check_spdx_header.py",
    "check-test-tethering": "tools/pre_commit/check_test_tethering.py",
}
MYPY_VERSION_ARG = re.compile(r"mypy\.py['\"]?\s+['\"]?(\d+\.\d+)")
MYPY_ERROR = re.compile(r"^([^:\s]+\.pyi?):\d+: error: (.*)$", re.MULTILINE)


def hooks_for(tree: Path) -> tuple[str, ...]:
    """The hooks of HOOK_SCRIPTS the tree's pre-commit config runs and the
    tree has the script of."""
    config = tree / ".pre-commit-config.yaml"
    text = config.read_text() if config.exists() else ""
    return tuple(hook for hook, script in HOOK_SCRIPTS.items()
                 if re.search(rf"^\s*-\s*id:\s*{re.escape(hook)}\s*(#.*)?$",
                              text, re.MULTILINE) and (
                                  script is None or (tree / script).exists()))


@dataclass(frozen=True)
class Tools:
    """Where the hooks' programs are: the line's venv."""

    venv: Path

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")

    def env(self) -> dict[str, str]:
        # mypy.py runs `mypy` from PATH.
        return {
            **os.environ, "PATH":
            f"{self.venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
        }

    def missing(self, hooks: tuple[str, ...]) -> list[str]:
        needed = {"typos": "typos", "mypy": "mypy"}
        return [
            needed[h] for h in hooks
            if h in needed and not (self.venv / "bin" / needed[h]).exists()
        ]


def _run(argv: list[str], cwd: Path, tools: Tools) -> tuple[int, str]:
    proc = subprocess.run(argv,
                          cwd=cwd,
                          env=tools.env(),
                          text=True,
                          stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT)
    return proc.returncode, proc.stdout


def _python(files: list[str]) -> list[str]:
    return [f for f in files if f.endswith((".py", ".pyi"))]


def mypy_errors(tree: Path, files: list[str], tools: Tools) -> Counter:
    """mypy's errors in `files` (those that exist in the tree), as the
    tree's hook runs it, by file and message (line numbers move)."""
    present = [f for f in _python(files) if (tree / f).exists()]
    if not present:
        return Counter()
    config = (tree / ".pre-commit-config.yaml").read_text()
    version = MYPY_VERSION_ARG.search(config)
    _, output = _run([
        tools.python, HOOK_SCRIPTS["mypy"],
        version.group(1) if version else "local", *present
    ], tree, tools)
    return Counter(MYPY_ERROR.findall(output))


def run_hook(hook: str, tree: Path, base: Path, files: list[str],
             tools: Tools) -> LintResult:
    """One hook on the files a PR changes (`tree` at the PR, `base` at the
    release it applies to)."""
    if hook == "mypy":
        new = mypy_errors(tree, files, tools) - mypy_errors(base, files, tools)
        if not new:
            return LintResult(hook, "ok")
        listed = "\n".join(f"{f}: error: {m}" for f, m in sorted(new))
        named = sorted({f for f, _ in new})
        return LintResult(hook, "new errors in " + ", ".join(named[:3]),
                          listed)
    if hook == "typos":
        argv = [str(tools.venv / "bin" / "typos"), "--force-exclude", *files]
    elif hook == "check-test-tethering":
        tests = [f for f in _python(files) if f.startswith("tests/")]
        if not tests:
            return LintResult(hook, "ok")
        argv = [tools.python, HOOK_SCRIPTS[hook], *tests]
    else:
        if not _python(files):
            return LintResult(hook, "ok")
        argv = [tools.python, HOOK_SCRIPTS[hook], *_python(files)]
    returncode, output = _run(argv, tree, tools)
    if returncode == 0:
        return LintResult(hook, "ok")
    named = sorted({f for f in files if f in output})
    return LintResult(hook, "issues in " + ", ".join(named[:3] or ["output"]),
                      output)
