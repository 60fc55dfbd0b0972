"""`make pr N=<number|name>`: what an upstream pull request needs, per patch.

For each selected patch (all by default) this writes out/pr/<nn>-<slug>/:
  title.txt  the PR title (the patch subject, already in vLLM's [Tag] style)
  body.md    why (the commit body), what changed (diffstat), the test plan
             with its commands, the recorded test results (make check-bisect
             / make test), `Part of RFC #19854`, what it depends on, DCO status
  patch      the commit as `git am` takes it, on top of its prerequisites
and points branch pr/<nn>-<slug> of vllm-src at: the base + the patch's
prerequisites + the patch. Prerequisites are the earlier patches that change
a file this patch (or another prerequisite) changes; when the patch does not
apply on those alone, it is the whole series before it. Nothing goes to the
network: opening the PR is left to the user.

The DCO check (a Signed-off-by: trailer naming the commit's author, as vLLM's
DCO bot wants) runs on every selected patch; a failure is reported by name
after the folders are written, and the command exits non-zero.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .check_bisect import RESULTS, load_results
from .check_series import _trailers, dco_problem
from .common import BasePin, Paths, UserError, git, main_wrapper, progress
from .srctree import (EXPORT_ENV, FORMAT_PATCH_ARGS, SERIES, _git_dir, _unexported_commits,
                      apply, operation_in_progress, read_series, rev)

RFC = "Part of RFC #19854"
COMMITTER = {"GIT_COMMITTER_NAME": "vLLM patch stack",
             "GIT_COMMITTER_EMAIL": "noreply@vllm.invalid"}


@dataclass
class Patch:
    number: int
    name: str          # file in patches/
    commit: str
    subject: str
    author: str
    message: str       # body without the subject
    files: list[str]
    status: str = ""   # Upstream-Status
    prereqs: list[int] = field(default_factory=list)
    # Files of the modules its added lines import (they may come from an
    # earlier patch that shares no file with this one).
    imports: set[str] = field(default_factory=set)
    branch: str = ""
    dco: str | None = None

    @property
    def slug(self) -> str:
        return f"{self.number:02d}-{self.name.removesuffix('.patch').lower()}"


def _load(paths: Paths, pin: BasePin) -> list[Patch]:
    src = paths.src
    names = read_series(paths)
    commits = git(src, "rev-list", "--reverse", f"{pin.tag}..{SERIES}").split()
    if len(commits) != len(names):
        raise UserError(f"branch {SERIES} has {len(commits)} commits, patches/series "
                        f"{len(names)}", "run `make apply` (or `make export`) first")
    patches = []
    for i, (name, commit) in enumerate(zip(names, commits), 1):
        subject, author, message = git(
            src, "log", "-1", "--format=%s%x00%an <%ae>%x00%b", commit).split("\0", 2)
        trailers = _trailers(f"{subject}\n\n{message}")
        files = git(src, "diff-tree", "--no-commit-id", "--name-only", "-r", commit).split()
        p = Patch(i, name, commit, subject, author, message.strip(), files,
                  dco=dco_problem(author, trailers))
        p.status = next((v for k, v in trailers if k == "Upstream-Status"), "")
        p.imports = _imported_files(git(src, "show", "--format=", commit))
        patches.append(p)
    return patches


_IMPORT = re.compile(r"^\+\s*(?:from\s+((?:vllm|tests)[\w.]*)\s+import\s+\(?([\w, ]*)"
                     r"|import\s+((?:vllm|tests)[\w.]*))", re.MULTILINE)


def _imported_files(diff: str) -> set[str]:
    """Files that may define the vllm/tests modules imported by added lines:
    `from a.b import c` may name module a/b or submodule a/b/c."""
    files: set[str] = set()
    for from_module, names, module in _IMPORT.findall(diff):
        modules = [module] if module else [from_module] + [
            f"{from_module}.{n.strip()}" for n in names.split(",") if n.strip()]
        for mod in modules:
            path = mod.replace(".", "/")
            files |= {f"{path}.py", f"{path}/__init__.py"}
    return files


def _prerequisites(patches: list[Patch], k: int) -> list[int]:
    """Numbers of the earlier patches that change what patch k (or they)
    change or import."""
    need = set(patches[k - 1].files) | patches[k - 1].imports
    found = []
    for p in reversed(patches[:k - 1]):
        if need & set(p.files):
            found.append(p.number)
            need |= set(p.files) | p.imports
    return sorted(found)


def _pick(src: Path, onto: str, commit: str) -> str | None:
    """Cherry-pick `commit` onto `onto` in a scratch index (no work tree is touched);
    None when its diff does not apply there exactly."""
    index = _git_dir(src) / "pstack-pr-index"
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        git(src, "read-tree", onto, env=env)
        diff = git(src, "diff", "--binary", "--full-index", f"{commit}^", commit)
        proc = subprocess.run(["git", "-C", str(src), "apply", "--cached"], input=diff,
                              env={**os.environ, **env}, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if proc.returncode != 0:
            return None
        tree = git(src, "write-tree", env=env).strip()
    finally:
        index.unlink(missing_ok=True)
    name, email, date = git(src, "log", "-1", "--format=%an%x00%ae%x00%ad", "--date=raw",
                            commit).split("\0")
    env = {**COMMITTER, "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email,
           "GIT_AUTHOR_DATE": date.strip(), "GIT_COMMITTER_DATE": date.strip()}
    message = git(src, "log", "-1", "--format=%B", commit)
    return git(src, "commit-tree", tree, "-p", onto, "-F", "-", env=env,
               input=message).strip()


def _branch(src: Path, pin: BasePin, patches: list[Patch], p: Patch) -> None:
    """pr/<slug> = base + prerequisites + the patch (or the whole prefix)."""
    p.branch = f"pr/{p.slug}"
    p.prereqs = _prerequisites(patches, p.number)
    tip = None
    if p.prereqs != list(range(1, p.number)):
        tip = rev(src, pin.tag)
        for n in [*p.prereqs, p.number]:
            tip = _pick(src, tip, patches[n - 1].commit)
            if tip is None:
                break
    if tip is None:  # the series as it is up to this patch
        p.prereqs = list(range(1, p.number))
        tip = p.commit
    git(src, "branch", "-f", p.branch, tip)


def _test_files(p: Patch) -> list[str]:
    return [f for f in p.files if f.startswith("tests/") and Path(f).name.startswith("test_")
            and f.endswith(".py")]


def _results(src: Path, p: Patch, results_file: Path) -> str:
    tree = git(src, "rev-parse", f"{p.commit}^{{tree}}").strip()
    record = next((r for r in load_results(results_file) if r.get("tree") == tree), None)
    if record is None:
        return ("No results recorded for this version of the patch: run `make check-bisect` "
                "(or `make test`).")
    checks = ", ".join(f"{k}: {v}" for k, v in record["checks"].items())
    lines = [f"`make check-bisect` on {record['date']}, at this patch on top of the ones "
             f"before it in the series (CPU, Python only; same tree as this patch):", "",
             f"- {checks}"]
    if record.get("ran"):
        lines.append(f"- tests: {record['ran']}")
    return "\n".join(lines)


def _body(paths: Paths, pin: BasePin, patches: list[Patch], p: Patch,
          results_file: Path) -> str:
    src = paths.src
    stat = git(src, "diff", "--stat=80", f"{p.branch}~1", p.branch).rstrip()
    trailers = {k for k, _ in _trailers(f"{p.subject}\n\n{p.message}")}
    why = "\n".join(line for line in p.message.splitlines()
                    if line.split(":", 1)[0] not in trailers).strip()
    deps = []
    for n in p.prereqs:
        d = patches[n - 1]
        m = re.match(r"Submitted \[(.+)\]", d.status)
        where = m.group(1) if m else f"not submitted yet: `make pr N={n}`, branch `pr/{d.slug}`"
        shared = sorted(set(d.files) & set(p.files))
        reason = f" (also changes {', '.join(f'`{f}`' for f in shared[:3])})" if shared else ""
        deps.append(f"- {d.subject} ({where}){reason}")
    tests = _test_files(p)
    py = [f for f in p.files if f.endswith(".py")]
    plan = ["```sh"]
    if tests:
        plan.append(f"pytest -q {' '.join(tests)}")
    if py:
        plan.append(f"pre-commit run --files {' '.join(py)}   # ruff, yapf, isort")
    plan += ["```", "",
             "On CPU, as the patch stack runs it: `make check-bisect` checks this patch on "
             "top of the ones before it (compile, ruff, yapf, isort, the tests above)."]
    if not tests:
        plan.insert(1, "# no test files in this patch: covered by the tests of later patches")
    return "\n".join([
        "## Purpose", "", why, "", f"{RFC}.", "",
        "## Depends on", "",
        *(deps or [f"Nothing: applies directly on vLLM {pin.version}."]), "",
        f"Branch `{p.branch}` in vllm-src: {pin.tag} + "
        + (f"{'patches' if len(p.prereqs) > 1 else 'patch'} "
           f"{', '.join(map(str, p.prereqs))} + " if p.prereqs else "")
        + f"this patch ({p.number}/{len(patches)} of the series).", "",
        "## Changes", "", "```", stat, "```", "",
        "## Test Plan", "", *plan, "",
        "## Test Result", "", _results(src, p, results_file), "",
        "---", "",
        f"DCO: {'ok, signed off by the author ' + p.author if not p.dco else 'FAILED: ' + p.dco}",
        f"Upstream-Status: {p.status or '(none)'}", "",
    ])


def select(patches: list[Patch], which: list[str]) -> list[Patch]:
    if not which or which == ["all"]:
        return patches
    chosen = []
    for w in which:
        if w.isdigit():
            if not 1 <= int(w) <= len(patches):
                raise UserError(f"no patch {w}: the series has {len(patches)}",
                                "make pr N=<1..n or part of a name>")
            matches = [patches[int(w) - 1]]
        else:
            matches = [p for p in patches if w.lower() in p.name.lower()
                       or w.lower() in p.subject.lower()]
            if len(matches) != 1:
                names = ", ".join(p.name for p in matches) or "none"
                raise UserError(f"{w!r} matches {len(matches)} patches ({names})",
                                "give a patch number or a more specific name")
        chosen += [m for m in matches if m not in chosen]
    return chosen


def pr(paths: Paths, which: list[str], out: Path, results_file: Path = RESULTS) -> list[Path]:
    pin = BasePin.load(paths.base_file)
    src = paths.src
    if not _git_dir(src).exists() or rev(src, SERIES) is None:
        apply(paths)
    op = operation_in_progress(src)
    if op:
        raise UserError(f"a {op} is in progress in {src}", "finish it first")
    unexported = _unexported_commits(paths, pin)
    if unexported:
        raise UserError("vllm-src has commits not exported to patches/: "
                        + "; ".join(unexported[-3:]), "`make export` first")
    patches = _load(paths, pin)
    chosen = select(patches, which)
    for p in chosen:
        _branch(src, pin, patches, p)
    written = []
    for p in chosen:
        folder = out / p.slug
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        (folder / "title.txt").write_text(p.subject + "\n")
        (folder / "body.md").write_text(_body(paths, pin, patches, p, results_file))
        proc = subprocess.run(["git", "-C", str(src), *FORMAT_PATCH_ARGS, "--stdout",
                               f"{p.branch}~1..{p.branch}"], env={**os.environ, **EXPORT_ENV},
                              text=True, stdout=subprocess.PIPE, check=True)
        (folder / "patch").write_text(proc.stdout)
        deps = f" after {', '.join(map(str, p.prereqs))}" if p.prereqs else ""
        progress(f"{folder}: {p.subject} (branch {p.branch}{deps})"
                 + (f"; DCO FAILED: {p.dco}" if p.dco else ""))
        written.append(folder)
    bad = [f"{p.number} {p.name}: {p.dco}" for p in chosen if p.dco]
    if bad:
        raise UserError("DCO check failed: " + "; ".join(bad),
                        "add the author's sign-off (`git commit --amend -s` as the author, "
                        "or reword), `make export`, then `make pr` again")
    return written


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="pr", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("which", nargs="*", help="patch numbers or parts of names (all)")
    args = parser.parse_args(argv)
    paths = Paths.default()
    pr(paths, args.which, paths.patches.parent / "out" / "pr")
    return 0


if __name__ == "__main__":
    main_wrapper(main)
