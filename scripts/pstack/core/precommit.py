"""The hooks of a vLLM tree's .pre-commit-config.yaml that run offline,
beyond the formatters of lint.py, as `make pr` runs them on the files of a
PR: typos, the hooks whose entry is a script of the tree (mypy, the SPDX
header check, the forbidden imports, the check that new tests are wired
into vLLM's Buildkite CI, ...) and the check for spaces in file names.
Which ones depends on the tree (hooks_for); NOT_RUN says which are left
out and why. Each runs with the line's venv (its tools are installed by
`make setup`).

A hook runs as pre-commit runs it on a commit: on the changed files its
`files`, `exclude` and `types` take (not at all when it takes none), with
its entry's arguments, and with those files as arguments unless it has
`pass_filenames: false`.

Two kinds are judged against the base. mypy: vLLM's mypy hook runs with
the stubs and pydantic of its own environment, and here some files already
report errors at the release (a few hundred in gpu_model_runner.py); a PR
fails mypy only if it adds errors to the files it touches. A hook that
takes no file names checks the whole tree (or what git has staged): a PR
fails it only with output lines the hook does not print at the release.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .errors import UserError
from .line import Line
from .lint import LintResult, lint, linters_for
from .vllm_src import VllmSrc

# Hooks of vLLM's configs (0.9.2, 0.10.2, 0.32) that `make pr` leaves out
# though a script of the tree runs them, and why. Every other hook that is
# typos, check-filenames or a script of the tree runs. Those of other
# repositories are left out too: ruff, yapf and isort run in lint.py;
# clang-format, markdownlint (Node), actionlint, shellcheck (0.32) and
# check-json are programs `make setup` does not install (of what they
# check, the series changes one Markdown file only: vLLM's CI lints it);
# pip-compile resolves against the package index. So are signoff-commit (a
# commit-msg hook: pr.py signs the commits off itself) and suggestion (an
# echo).
NOT_RUN = {
    "mypy-local": "tools/mypy.sh type-checks whole package directories "
    "(minutes a run, twice per PR); the 0.32 `mypy` hook takes files",
    "mypy-3.9": "as mypy-local, and only in CI (stages: manual)",
    "mypy-3.10": "as mypy-local, and only in CI (stages: manual)",
    "mypy-3.11": "as mypy-local, and only in CI (stages: manual)",
    "mypy-3.12": "as mypy-local, and only in CI (stages: manual)",
    "shellcheck": "tools/shellcheck.sh downloads shellcheck",
    "check-pickle-imports": "needs pathspec, which `make setup` does not "
    "install (0.32 checks pickle in check-forbidden-imports)",
    "validate-docker-versions": "needs dockerfile-parse, which `make "
    "setup` does not install",
    "format-torch-nightly-test": "a generator: rewrites requirements files",
    "update-dockerfile-graph": "a generator: redraws a PNG with docker",
    "rust-cargo-autoinherit": "needs cargo and its plugins",
    "rust-cargo-sort": "needs cargo and its plugins",
    "rust-cargo-fmt": "needs cargo",
}
# identify's tags (pre-commit's `types`) by file name suffix.
TYPE_SUFFIXES = {
    "python": (".py", ),
    "pyi": (".pyi", ),
    "rust": (".rs", ),
    "proto": (".proto", ),
    "png": (".png", ),
    "shell": (".sh", ".bash"),
    "yaml": (".yaml", ".yml"),
    "json": (".json", ),
}
ANY_FILE = ("file", "text")
# A hook: from its `- id:` line up to the next hook or repository.
HOOK = re.compile(
    r"^\s*-\s*id:\s*([\w.-]+)[^\n]*$(.*?)(?=^\s*-\s*(?:id|repo):|\Z)",
    re.MULTILINE | re.DOTALL)
KEY = re.compile(r"^\s+(\w+):[ \t]*(.*?)\s*$", re.MULTILINE)
TOP_EXCLUDE = re.compile(r"^exclude:[ \t]*(.*?)\s*$", re.MULTILINE)
MYPY_ERROR = re.compile(r"^([^:\s]+\.pyi?):\d+: error: (.*)$", re.MULTILINE)


def _scalar(raw: str) -> str:
    """A YAML scalar as the configs write it: quoted, or plain up to a
    comment."""
    if raw and raw[0] in "'\"" and raw.find(raw[0], 1) > 0:
        return raw[1:raw.find(raw[0], 1)]
    return raw.split(" #", 1)[0].strip()


def _list(raw: str) -> tuple[str, ...]:
    """A one-line YAML flow list: `[python, pyi]`."""
    items = raw.split("#", 1)[0].strip().strip("[]").split(",")
    return tuple(_scalar(i.strip()) for i in items if i.strip())


@dataclass(frozen=True)
class Hook:
    """A hook of the config, with what pre-commit reads to run it."""

    id: str
    entry: str = ""
    files: str = ""
    exclude: str = ""
    types: tuple[str, ...] = ()
    types_or: tuple[str, ...] = ()
    pass_filenames: bool = True
    always_run: bool = False

    @property
    def script(self) -> str | None:
        """The tree's file the entry runs (`python x.py`, `bash x.sh`, or
        the path itself), or None."""
        words = shlex.split(self.entry)
        if words[:1] in (["python"], ["python3"], ["bash"], ["sh"]):
            words = words[1:]
        return words[0] if words and "/" in words[0] else None

    def argv(self, tree: Path, tools: Tools) -> list[str]:
        words = shlex.split(self.entry)
        if words[0] in ("python", "python3"):
            return [tools.python, *words[1:]]
        if words[0] in ("bash", "sh"):
            return words
        return [str(tree / words[0]), *words[1:]]

    def takes(self, path: str, exclude: str = "") -> bool:
        """Whether pre-commit gives the hook this file (`exclude`: the
        config's own, for every hook)."""
        name = path.lower()

        def tagged(tag: str) -> bool:
            return tag in ANY_FILE or name.endswith(TYPE_SUFFIXES.get(tag, ()))

        return ((not self.files or re.search(self.files, path) is not None)
                and not any(pattern and re.search(pattern, path)
                            for pattern in (self.exclude, exclude))
                and all(tagged(t) for t in self.types)
                and (not self.types_or or any(map(tagged, self.types_or))))


def read_hooks(config: str) -> dict[str, Hook]:
    """The hooks of a .pre-commit-config.yaml, by id (the first of an id
    that appears twice)."""
    hooks: dict[str, Hook] = {}
    for hook_id, block in HOOK.findall(config):
        keys = {k: _scalar(v) for k, v in KEY.findall(block)}
        lists = dict(KEY.findall(block))
        hooks.setdefault(
            hook_id,
            Hook(hook_id,
                 entry=keys.get("entry", ""),
                 files=keys.get("files", ""),
                 exclude=keys.get("exclude", ""),
                 types=_list(lists.get("types", "")),
                 types_or=_list(lists.get("types_or", "")),
                 pass_filenames=keys.get("pass_filenames") != "false",
                 always_run=keys.get("always_run") == "true"))
    return hooks


def _config(tree: Path) -> str:
    config = tree / ".pre-commit-config.yaml"
    return config.read_text() if config.exists() else ""


def runs(hook: Hook, tree: Path) -> bool:
    """Whether `make pr` runs the hook on this tree."""
    if hook.id in NOT_RUN:
        return False
    if hook.id in ("typos", "check-filenames"):
        return True
    return hook.script is not None and (tree / hook.script).is_file()


def hooks_for(tree: Path) -> tuple[str, ...]:
    """The hooks of the tree's pre-commit config `make pr` runs, in the
    config's order."""
    return tuple(hook.id for hook in read_hooks(_config(tree)).values()
                 if runs(hook, tree))


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


def mypy_errors(tree: Path, argv: list[str], files: list[str],
                tools: Tools) -> Counter:
    """mypy's errors in `files` (those that exist in the tree), as the
    hook's `argv` runs it, by file and message (line numbers move)."""
    present = [f for f in _python(files) if (tree / f).exists()]
    if not present:
        return Counter()
    _, output = _run([*argv, *present], tree, tools)
    return Counter(MYPY_ERROR.findall(output))


def _failed(hook: str, files: list[str], output: str) -> LintResult:
    named = sorted({f for f in files if f in output})
    return LintResult(hook, "issues in " + ", ".join(named[:3] or ["output"]),
                      output)


def run_hook(hook: str, tree: Path, base: Path, files: list[str],
             tools: Tools) -> LintResult:
    """One hook on the files a PR changes (`tree` at the PR, `base` at the
    release it applies to)."""
    config = _config(tree)
    spec = read_hooks(config).get(hook, Hook(hook))
    top = TOP_EXCLUDE.search(config)
    exclude = _scalar(top.group(1)) if top else ""
    taken = [f for f in files if spec.takes(f, exclude)]
    if not taken and not spec.always_run:
        return LintResult(hook, "ok")
    if hook == "check-filenames":
        # Its entry is `git ls-files | grep " "`: the release passes it, so
        # only a file the PR adds or changes can fail it.
        spaced = [f for f in taken if " " in f]
        return (_failed(hook, spaced, "\n".join(spaced))
                if spaced else LintResult(hook, "ok"))
    if hook == "mypy":
        new = (mypy_errors(tree, spec.argv(tree, tools), taken, tools) -
               mypy_errors(base, spec.argv(base, tools), taken, tools))
        if not new:
            return LintResult(hook, "ok")
        listed = "\n".join(f"{f}: error: {m}" for f, m in sorted(new))
        named = sorted({f for f, _ in new})
        return LintResult(hook, "new errors in " + ", ".join(named[:3]),
                          listed)
    if hook == "typos":
        argv = [str(tools.venv / "bin" / "typos"), "--force-exclude"]
    else:
        argv = spec.argv(tree, tools)
    returncode, output = _run(argv + (taken if spec.pass_filenames else []),
                              tree, tools)
    if returncode == 0:
        return LintResult(hook, "ok")
    missing = re.search(r"ModuleNotFoundError: (.*)", output)
    if missing:
        # Else a hook that cannot start would pass, at the PR as at the base.
        return LintResult(hook, f"could not run: {missing.group(1)}", output)
    if not spec.pass_filenames:
        _, at_base = _run(spec.argv(base, tools), base, tools)
        seen = set(at_base.splitlines())
        output = "\n".join(line for line in output.splitlines()
                           if line not in seen)
        if not output:
            return LintResult(hook, "ok")
    return _failed(hook, taken, output)


def lint_change(layout: Line, parent: str, head: str,
                scratch: str) -> list[LintResult]:
    """The release's formatters (lint.py) and offline hooks on the files
    that `head` adds or changes since `parent` in the line's vllm-src, with
    the tools of the line's venv, as pre-commit sees them being committed:
    in a scratch worktree at `head` (build/<version>/<scratch>-tip) whose
    HEAD goes back to `parent` with the change staged (hooks that read `git
    diff --cached`: the import checks of 0.9.2 and 0.10.2), the release in
    another (<scratch>-base: what mypy reports there is not the change's).
    The worktree is back at `head` after, so that its next checkout finds
    nothing staged, nor a file a hook fixed in place (0.9.2's SPDX check
    adds the header it finds missing)."""
    src = VllmSrc(layout.src)
    changed = src.git("diff", "--name-only", "--diff-filter=AM", parent,
                      head).split()
    worktree = src.scratch_worktree(layout.build / f"{scratch}-tip", head)
    tree = worktree.path
    base = src.scratch_worktree(layout.build / f"{scratch}-base",
                                layout.pin.tag).path
    python = [f for f in changed if f.endswith(".py")]
    results = [
        lint(linter, python, tree, python=layout.venv_python)
        for linter in linters_for(tree)
    ]
    tools = Tools(layout.venv)
    hooks = hooks_for(tree)
    missing = tools.missing(hooks)
    if missing:
        raise UserError(
            f"{layout.venv.name} lacks {', '.join(missing)}, which the "
            f"pre-commit config of vLLM {layout.version} runs",
            f"make setup LINE={layout.version}")
    worktree.git("reset", "-q", "--soft", parent)
    try:
        return results + [
            run_hook(h, tree, base, changed, tools) for h in hooks
        ]
    finally:
        worktree.git("reset", "-q", "--hard", head)
