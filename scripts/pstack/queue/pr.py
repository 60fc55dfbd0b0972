"""`make pr N=<number|name>`: what an upstream pull request needs, per patch.

For each selected patch (all by default) this writes out/pr/<nn>-<slug>/:
  title.txt  the PR title (the patch subject, already in vLLM's [Tag] style)
  body.md    in the PR template of the line's release (pr_body.py): why
             (the commit body), what it depends on, the test plan with its
             commands, the recorded test results (make check-bisect / make
             test), the release's linters run on the branch, DCO status
  patch      the commit as `git am` takes it, on top of its prerequisites
and points branch pr/<nn>-<slug> of vllm-src at: the base + the patch's
prerequisites + the patch. Prerequisites are the earlier patches that
change a file this patch (or another prerequisite) changes or imports; when
the patch does not apply on those alone, it is the whole series before it.
Nothing goes to the network: opening the PR is left to the user.

The PRs are sent by the person running `make pr`, as their git config
(`user.name`, `user.email`) names them: each commit of a PR's branch, and
its `patch`, carries their Signed-off-by: instead of the project's own
trailers (the project alias's sign-off, Upstream-Status:), and a patch
the alias authored has them as its author. Without such an identity, or
with the alias's, the command refuses once the patches are chosen, before
any branch or folder is written.

The DCO check (a Signed-off-by: trailer naming the commit's author, as
vLLM's DCO bot wants, and one of the person sending it) and the linters of
the release's pre-commit config that run offline (core/lint.py,
core/precommit.py, on the files the PR changes, in a worktree of its
branch) run on every selected patch; a failure is reported by name after
the folders are written, and the command exits non-zero.
"""

from __future__ import annotations

import argparse
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import UserError, progress
from ..core.gitrepo import GitRepo, Identity
from ..core.line import Line, has_cpu_runtime
from ..core.lint import LintResult
from ..core.patch import Patch
from ..core.pin import BasePin
from ..core.precommit import lint_change
from ..core.series import format_patch, read_series
from ..core.vllm_src import SERIES, VllmSrc
from .apply import apply
from .guard import refuse_unexported
from .pr_body import PrContext, body, not_run_note, results_for


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("which",
                        nargs="*",
                        help="patch numbers or parts of names (all)")


def run(args: argparse.Namespace, layout: Line) -> int:
    pr(layout, args.which, layout.out / "pr")
    return 0


@dataclass
class SeriesPatch:
    """A patch at its place in the series, and what its PR depends on."""

    number: int
    name: str  # file in patches/
    commit: str
    patch: Patch
    files: list[str]
    # Files of the modules its added lines import (they may come from an
    # earlier patch that shares no file with this one).
    imports: set[str] = field(default_factory=set)
    prereqs: list[int] = field(default_factory=list)
    branch: str = ""
    # The commit at the tip of the PR's branch, as the person sends it.
    sent: Patch | None = None

    @property
    def subject(self) -> str:
        return self.patch.subject

    @property
    def slug(self) -> str:
        return f"{self.number:02d}-{self.name.removesuffix('.patch').lower()}"


def _load(layout: Line, src: VllmSrc, pin: BasePin) -> list[SeriesPatch]:
    names = read_series(layout)
    commits = src.series_commits(pin)
    if len(commits) != len(names):
        raise UserError(
            f"branch {SERIES} has {len(commits)} commits, "
            f"{layout.folder}/series {len(names)}",
            "run `make apply` (or `make export`) first")
    return [
        SeriesPatch(number,
                    name,
                    commit,
                    Patch.from_commit(src, commit),
                    src.changed_files(commit),
                    imports=imported_files(src.git("show", "--format=",
                                                   commit)))
        for number, (name, commit) in enumerate(zip(names, commits), 1)
    ]


_IMPORT = re.compile(
    r"^\+\s*(?:from\s+((?:vllm|tests)[\w.]*)\s+import\s+\(?([\w, ]*)"
    r"|import\s+((?:vllm|tests)[\w.]*))", re.MULTILINE)


def imported_files(diff: str) -> set[str]:
    """Files that may define the vllm/tests modules imported by added lines:
    `from a.b import c` may name module a/b or submodule a/b/c."""
    files: set[str] = set()
    for from_module, names, module in _IMPORT.findall(diff):
        modules = [module] if module else [from_module] + [
            f"{from_module}.{n.strip()}"
            for n in names.split(",") if n.strip()
        ]
        for mod in modules:
            path = mod.replace(".", "/")
            files |= {f"{path}.py", f"{path}/__init__.py"}
    return files


def prerequisites(patches: list[SeriesPatch], k: int) -> list[int]:
    """Numbers of the earlier patches that change what patch k (or they)
    change or import."""
    need = set(patches[k - 1].files) | patches[k - 1].imports
    found = []
    for p in reversed(patches[:k - 1]):
        if need & set(p.files):
            found.append(p.number)
            need |= set(p.files) | p.imports
    return sorted(found)


# Whose the patches in patches/ are: the project, not a person. Its
# sign-off certifies nothing for vLLM's DCO check, nor does any address at
# .invalid (a domain that can never receive mail), e.g. the stack's fixed
# committers in core/gitrepo.py.
PROJECT_ALIAS = Identity("vLLM KV offload team",
                         "kv-offload@vllm-patch-stack.invalid")
# The project's bookkeeping in a commit message (core/patch.py), not the
# PR's: the only trailers the series has besides sign-offs.
PROJECT_TRAILERS = ("Upstream-Status", )


def is_person(email: str) -> bool:
    """Whether an address can be a person's (not the alias, not .invalid).

    >>> is_person("ada@example.com"), is_person("noreply@vllm.invalid")
    (True, False)
    """
    address = email.strip().strip("<>").lower()
    return bool(address) and address != PROJECT_ALIAS.email and not (
        address.endswith(".invalid"))


def submitter(project: Path) -> Identity:
    """The person sending the PRs: user.name and user.email of their git
    config, as `git commit -s` signs off, read in the project's checkout
    (not in vllm-src, whose commits take the stack's fixed identities)."""
    repo = GitRepo(project)
    name, email = (repo.git("config", key, check=False).strip()
                   for key in ("user.name", "user.email"))
    # Set in the checkout, it wins over a global alias too.
    hint = ("git config user.name 'Your Name' && git config user.email "
            "you@example.com (here, or --global), then `make pr` again")
    if not name or not email:
        raise UserError(
            "`make pr` signs the PRs off as you, and git has no "
            "user.name or user.email", hint)
    if not is_person(email):
        raise UserError(
            f"`make pr` signs the PRs off as you, and your git user.email "
            f"is {email}, the project's address, not a person's", hint)
    return Identity(name, email)


def _signoff(person: Identity) -> str:
    return f"{person.name} <{person.email}>"


def sent_message(patch: Patch, person: Identity) -> str:
    """The commit message a PR sends: the patch's without the project's
    trailers (Upstream-Status:, the sign-offs of no person), with the
    person's Signed-off-by: last. Others' sign-offs stay: a patch relayed
    keeps its author's certificate and adds the sender's."""
    signoff = _signoff(person)
    kept = [
        f"{key}: {value}" for key, value in patch.trailers
        if key not in PROJECT_TRAILERS and not (key == "Signed-off-by" and (
            value == signoff or not is_person(value.rpartition("<")[2])))
    ]
    kept.append(f"Signed-off-by: {signoff}")  # once, and last
    body = f"{patch.body}\n\n" if patch.body else ""
    return f"{patch.subject}\n\n{body}" + "\n".join(kept) + "\n"


def _applied(src: VllmSrc, onto: str, commit: str) -> str | None:
    """The tree of `commit`'s diff applied onto `onto`, in a scratch index
    (no work tree is touched); None when it does not apply there exactly."""
    index = src.git_dir / "pstack-pr-index"
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        src.git("read-tree", onto, env=env)
        diff = src.git("diff", "--binary", "--full-index", f"{commit}^",
                       commit)
        if src.run("apply", "--cached", input=diff, env=env).returncode:
            return None
        return src.git("write-tree", env=env).strip()
    finally:
        index.unlink(missing_ok=True)


def _send(src: VllmSrc, tree: str, parent: str, commit: str,
          person: Identity) -> str:
    """`commit` as the person sends it: `tree` on `parent`, its message
    signed off by them (sent_message), its date. vLLM's DCO check wants
    each commit signed off by its author: a patch of the alias gets the
    person as its author, another keeps its own (it carries their
    sign-off). The person commits it, as `git commit -s` would."""
    patch = Patch.from_commit(src, commit)
    name, email, date = src.git("log", "-1", "--format=%an%x00%ae%x00%ad",
                                "--date=raw", commit).split("\0")
    author = Identity(name, email) if is_person(email) else person
    env = {
        **author.author(),
        **person.committer(),
        "GIT_AUTHOR_DATE": date.strip(),
        "GIT_COMMITTER_DATE": date.strip(),
    }
    return src.git("commit-tree",
                   tree,
                   "-p",
                   parent,
                   "-F",
                   "-",
                   env=env,
                   input=sent_message(patch, person)).strip()


def _branch(src: VllmSrc, pin: BasePin, patches: list[SeriesPatch],
            p: SeriesPatch, person: Identity) -> None:
    """pr/<slug> = base + prerequisites + the patch (or the whole prefix),
    each commit as the person sends it."""
    p.branch = f"pr/{p.slug}"
    p.prereqs = prerequisites(patches, p.number)
    tip = None
    if p.prereqs != list(range(1, p.number)):
        tip = src.rev(pin.tag)
        for n in [*p.prereqs, p.number]:
            tree = _applied(src, tip, patches[n - 1].commit)
            if tree is None:
                tip = None
                break
            tip = _send(src, tree, tip, patches[n - 1].commit, person)
    if tip is None:  # the series as it is up to this patch
        p.prereqs = list(range(1, p.number))
        tip = src.rev(pin.tag)
        for d in patches[:p.number]:
            tip = _send(src, src.tree(d.commit), tip, d.commit, person)
    src.git("branch", "-f", p.branch, tip)
    p.sent = Patch.from_commit(src, p.branch)


def dco_problem(patch: Patch, person: Identity) -> str | None:
    """vLLM's DCO check on a PR's commit (Patch.dco_problem), and the
    sign-off of the person sending it."""
    problem = patch.dco_problem()
    if problem is None and _signoff(person) not in patch.trailer(
            "Signed-off-by"):
        problem = f"no Signed-off-by: from you, {_signoff(person)}"
    return problem


def _test_files(p: SeriesPatch) -> list[str]:
    return [
        f for f in p.files if f.startswith("tests/")
        and Path(f).name.startswith("test_") and f.endswith(".py")
    ]


def _depends_on(patches: list[SeriesPatch], p: SeriesPatch) -> list[str]:
    deps = []
    for n in p.prereqs:
        d = patches[n - 1]
        m = re.match(r"Submitted \[(.+)\]", d.patch.upstream_status)
        where = m.group(1) if m else (f"not submitted yet: `make pr N={n}`, "
                                      f"branch `pr/{d.slug}`")
        shared = sorted(set(d.files) & set(p.files))
        reason = ""
        if shared:
            reason = " (also changes " + ", ".join(f"`{f}`"
                                                   for f in shared[:3]) + ")"
        deps.append(f"- {d.subject} ({where}){reason}")
    return deps


def lint_branch(layout: Line, p: SeriesPatch) -> list[LintResult]:
    """The release's linters on the files the PR changes, at its branch, as
    pre-commit sees its commit being made."""
    return lint_change(layout, f"{p.branch}~1", p.branch, "pr")


def _context(src: VllmSrc, layout: Line, pin: BasePin,
             patches: list[SeriesPatch], p: SeriesPatch, results_file: Path,
             lints: list[LintResult]) -> PrContext:
    runs_here = has_cpu_runtime(layout)
    return PrContext(pin=pin,
                     number=p.number,
                     series_length=len(patches),
                     branch=p.branch,
                     prereqs=p.prereqs,
                     depends_on=_depends_on(patches, p),
                     diffstat=src.git("diff", "--stat=80", f"{p.branch}~1",
                                      p.branch).rstrip(),
                     test_files=_test_files(p),
                     python_files=[f for f in p.files if f.endswith(".py")],
                     results=results_for(results_file, src.tree(p.commit),
                                         "CPU, Python only")
                     if runs_here else not_run_note(pin.version),
                     lints=lints,
                     runs_here=runs_here)


def select(patches: list[SeriesPatch], which: list[str]) -> list[SeriesPatch]:
    if not which or which == ["all"]:
        return patches
    chosen: list[SeriesPatch] = []
    for w in which:
        if w.isdigit():
            if not 1 <= int(w) <= len(patches):
                raise UserError(f"no patch {w}: the series has {len(patches)}",
                                "make pr N=<1..n or part of a name>")
            matches = [patches[int(w) - 1]]
        else:
            matches = [
                p for p in patches if w.lower() in p.name.lower()
                or w.lower() in p.subject.lower()
            ]
            if len(matches) != 1:
                names = ", ".join(p.name for p in matches) or "none"
                raise UserError(
                    f"{w!r} matches {len(matches)} patches ({names})",
                    "give a patch number or a more specific name")
        chosen += [m for m in matches if m not in chosen]
    return chosen


def pr(layout: Line,
       which: list[str],
       out: Path,
       results_file: Path | None = None) -> list[Path]:
    pin = layout.pin
    results_file = results_file or layout.check_results
    src = VllmSrc(layout.src)
    if not src.exists() or src.rev(SERIES) is None:
        apply(layout)
    op = src.operation_in_progress()
    if op:
        raise UserError(f"a {op} is in progress in {src.path}",
                        "finish it first")
    refuse_unexported(layout, pin, "`make export` first")
    patches = _load(layout, src, pin)
    chosen = select(patches, which)
    # Once the patches are chosen (a wrong N is the first thing to say),
    # before any branch or folder is written.
    person = submitter(layout.root or layout.patches.parent)
    for p in chosen:
        _branch(src, pin, patches, p, person)
    written = []
    lint_failures = []
    for p in chosen:
        progress(f"PR {p.number}/{len(patches)}: linting {p.branch}")
        lints = lint_branch(layout, p)
        folder = out / p.slug
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        (folder / "title.txt").write_text(p.subject + "\n")
        ctx = _context(src, layout, pin, patches, p, results_file, lints)
        assert p.sent is not None
        (folder / "body.md").write_text(body(src.path, p.sent, ctx))
        (folder / "patch").write_text(format_patch(src, p.branch))
        failed = [r for r in lints if not r.ok]
        for r in failed:
            (folder / f"{r.linter}.log").write_text(r.output)
        lint_failures += [
            f"{p.number} {r.linter}: {r.summary}" for r in failed
        ]
        dco = dco_problem(p.sent, person)
        deps = f" after {', '.join(map(str, p.prereqs))}" if p.prereqs else ""
        progress(f"{folder}: {p.subject} (branch {p.branch}{deps})" +
                 (f"; DCO FAILED: {dco}" if dco else "") +
                 "".join(f"; {r.linter}: {r.summary}" for r in failed))
        written.append(folder)
    bad = [
        f"{p.number} {p.name}: {dco_problem(p.sent, person)}" for p in chosen
        if p.sent and dco_problem(p.sent, person)
    ]
    if bad:
        raise UserError(
            "DCO check failed: " + "; ".join(bad),
            "add the author's sign-off (`git commit --amend -s` as the "
            "author, or reword), `make export`, then `make pr` again")
    if lint_failures:
        raise UserError(
            "linters failed: " + "; ".join(lint_failures),
            f"their output is in {out}/<pr>/<linter>.log; fix the patch in "
            "vllm-src, `make export`, then `make pr` again")
    return written
