"""Move a line of the stack onto a newer vLLM release, in place.

`make rebase TO=<version>` runs this on a copy of the line it carries
(rebase.py), so that the line itself stays as it is, and `make
rebase-report` on a scratch copy (rebase_walk.py); the steps:

1. Look the release up on the configured package index (pip's own finder,
   as `make fetch` does), download its sdist and check the sha256 the
   index publishes.
2. Import it in vllm-src as the next commit on branch `upstream`, a child
   of the current base, tagged `v<version>` (fixed identity and date: the
   same commit id on every machine; the pin's `previous` list lets `make
   apply` rebuild the same chain).
3. `git rebase --onto v<new> v<old> series`. Patches that the release
   absorbed in its own form (lines/upstream.toml, checked against the
   release's tree: see absorbed.py) are left out, with the evidence;
   patches whose changes are already upstream line for line become empty
   and are dropped. Both are named. Patches with a recorded version for
   the release (a resolution made once, see carried.py) are replaced by it
   (`exec git am <file>` in the todo list); so are the patches the record
   leaves out (dropped) and those written in the line (an `exec git am`
   after the patch before them). The first conflict stops the
   rebase: the patch, its conflicting files and the
   commands to continue or abort are printed, and re-running `make rebase
   TO=<version>` after resolving continues where it stopped.
4. Once the whole series is on the new base: the line's base.toml pins the
   new release, its patches are re-exported and re-applied (the exported
   files apply as they are), and the `git range-diff` of the old and new
   series is written for the reviewer to the file the caller names
   (docs/reports/<version>/carry.range-diff for a carry).

Nothing is lost on the way: the rebase refuses to start while vllm-src has
uncommitted work or unexported commits, keeps the old series on a backup
branch, and `make rebase-abort` puts series, upstream and the pin back.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..core.download import fetch, find_release
from ..core.errors import UserError, progress
from ..core.gitrepo import STACK_COMMITTER
from ..core.line import Line
from ..core.pin import BasePin
from ..core.series import read_series
from ..core.vllm_src import SERIES, UPSTREAM, VllmSrc
from .absorbed import find, read_upstream_entries
from .apply import apply
from .carried import ReplayPlan, read_record
from .export import export
from .guard import ensure_safe_to_reset
from .importer import import_release, init_repo
from .todo import TodoPlan

# The rebased commits get the committer `make apply` uses, with the
# author's date: the same commit ids as a fresh apply of the exported
# patches.
COMMIT_ENV = {**STACK_COMMITTER.committer(), "GIT_EDITOR": "true"}

# What an unmerged path's status code means, for people.
CONFLICT_KINDS = {
    "DU": "deleted upstream, changed by the patch",
    "UD": "deleted by the patch, changed upstream",
    "AA": "added on both sides",
    "DD": "deleted on both sides",
    "AU": "added upstream",
    "UA": "added by the patch"
}

# ---------------------------------------------------------------- state


@dataclass(frozen=True)
class OldPatch:
    """A patch of the series as it was before the rebase."""

    number: int  # from 1
    commit: str
    name: str  # its file in patches/
    subject: str


@dataclass
class RebaseState:
    """What a rebase under way needs to finish or to be undone (kept in
    vllm-src's .git)."""

    old_pin: BasePin
    new_pin: BasePin
    old_tip: str
    old_upstream: str
    patches: list[OldPatch]  # the old series, in order
    # Commits git dropped because they became empty: already upstream.
    upstreamed: list[str] = field(default_factory=list)
    # Commit -> what the new release has of it (lines/upstream.toml):
    # absorbed ones are left out of the rebase, partly absorbed ones not.
    absorbed: dict[str, str] = field(default_factory=dict)
    partly_absorbed: dict[str, str] = field(default_factory=dict)
    # Commit -> the recorded version of its patch for the new release
    # (carried.py), applied instead of the commit.
    replayed: dict[str, str] = field(default_factory=dict)
    # Commits the new line's record leaves out.
    left_out: list[str] = field(default_factory=list)
    # Patches written in the new line (files), after the commit named ("":
    # before the first).
    inserted: dict[str, list[str]] = field(default_factory=dict)

    def save(self, src: VllmSrc) -> None:
        src.rebase_state_file.write_text(
            json.dumps(asdict(self), indent=1) + "\n")

    @classmethod
    def load(cls, src: VllmSrc) -> RebaseState | None:
        if not src.rebase_state_file.exists():
            return None
        data = json.loads(src.rebase_state_file.read_text())
        return cls(old_pin=BasePin.from_dict(data["old_pin"]),
                   new_pin=BasePin.from_dict(data["new_pin"]),
                   old_tip=data["old_tip"],
                   old_upstream=data["old_upstream"],
                   patches=[OldPatch(**p) for p in data["patches"]],
                   upstreamed=data["upstreamed"],
                   absorbed=data.get("absorbed", {}),
                   partly_absorbed=data.get("partly_absorbed", {}),
                   replayed=data.get("replayed", {}),
                   left_out=data.get("left_out", []),
                   inserted=data.get("inserted", {}))

    @staticmethod
    def clear(src: VllmSrc) -> None:
        src.rebase_state_file.unlink(missing_ok=True)

    def patch(self, commit: str) -> OldPatch | None:
        return next((p for p in self.patches if p.commit == commit), None)

    def label(self, commit: str) -> str:
        p = self.patch(commit)
        if p is None:
            return f"commit {commit[:12]}"
        return f"patch {p.number}/{len(self.patches)} {p.name}"


@dataclass
class Stop:
    """The rebase stopped at a patch: its old commit and the unmerged
    files."""

    commit: str
    files: dict[str, str]  # path -> git status code (UU, DU, UD, AA, ...)
    message: str = ""


@dataclass
class Result:
    version: str
    kept: list[str] = field(default_factory=list)  # subjects, new order
    dropped: list[str] = field(default_factory=list)  # already upstream
    # Subject -> evidence, of the patches left out as absorbed upstream.
    absorbed: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # `rebase --skip`ped
    left_out: list[str] = field(default_factory=list)  # as recorded
    range_diff: Path | None = None


# ---------------------------------------------------------------- git rebase


def _stopped_commit(src: VllmSrc) -> str | None:
    stopped = src.git_dir / "rebase-merge" / "stopped-sha"
    ref = stopped.read_text().strip() if stopped.exists() else "REBASE_HEAD"
    return src.rev(ref)


def run_rebase(src: VllmSrc,
               state: RebaseState,
               args: list[str],
               config: tuple[str, ...] = (),
               env: dict[str, str] | None = None) -> Stop | None:
    """Run one `git rebase` command; None when the rebase is complete."""
    cfg = [a for c in config for a in ("-c", c)]
    proc = src.run(*cfg, "rebase", *args, env={**COMMIT_ENV, **(env or {})})
    dropped = re.finditer(
        r"^dropping ([0-9a-f]{40}) .* -- patch contents already upstream",
        proc.stdout + proc.stderr, re.M)
    for m in dropped:
        commit = m.group(1)
        if state.patch(commit) and commit not in state.upstreamed:
            progress(f"{state.label(commit)}: already upstream, dropped")
            state.upstreamed.append(commit)
            state.save(src)
    failed_exec = re.search(r"^warning: execution failed: (.*)$",
                            proc.stdout + proc.stderr, re.M)
    if failed_exec:
        # Only replays are executed: a recorded version that did not apply.
        recorded = Path(shlex.split(failed_exec.group(1))[-1])
        raise UserError(
            f"the recorded version {recorded.parent.parent.name}/"
            f"{recorded.parent.name}/{recorded.name} "
            f"does not apply on {state.new_pin.tag}",
            "`make rebase-abort`, then delete its entry from the line's "
            "carried.toml: `make rebase` then carries the patch again from "
            "the line it comes from")
    if src.operation_in_progress() != "git rebase":
        if proc.returncode != 0:
            output = (proc.stderr or proc.stdout).strip()
            raise UserError(f"git rebase failed: {output[-500:]}")
        return None
    commit = _stopped_commit(src)
    if state.patch(commit) is None:
        raise UserError(
            f"git rebase stopped outside the series ({commit}): "
            f"{proc.stderr.strip()[-300:]}", f"look at `git -C {src.path} "
            "status`")
    last = [line for line in proc.stderr.splitlines() if line.strip()]
    return Stop(commit, src.unmerged(), last[-1] if last else "")


def _stop_error(state: RebaseState, src: VllmSrc, stop: Stop,
                line_arg: str) -> UserError:
    """The stop, and how to go on (`line_arg`: the make variable naming the
    line carried, if not the default one)."""
    to = state.new_pin.version
    if stop.files:
        what = "conflicting files: " + ", ".join(
            f +
            ("" if code == "UU" else f" ({CONFLICT_KINDS.get(code, code)})")
            for f, code in stop.files.items())
    else:
        what = stop.message or "see `git status`"
    return UserError(
        f"rebase onto v{to} stopped at {state.label(stop.commit)} "
        f"({state.patch(stop.commit).subject}); {what}",
        f"resolve in {src.path} and `git -C {src.path} add` the files, then "
        f"`make rebase TO={to}{line_arg}` continues (it runs `git rebase "
        f"--continue` and finishes the job); `git -C {src.path} rebase "
        f"--skip` drops this patch; `make rebase-abort{line_arg}` restores "
        "the series, upstream and the pin")


# ---------------------------------------------------------------- steps


def refuse_same_version(layout: Line, version: str) -> BasePin:
    """The line's pin, unless it pins `version` already: then there is
    nothing to move."""
    pin = layout.pin
    if version == pin.version:
        raise UserError(
            f"the line in {layout.folder}/ is already based on "
            f"vLLM {version}", "nothing to rebase; pick a newer release")
    return pin


def no_version_given() -> UserError:
    """The refusal of a rebase with no version given and none under way."""
    return UserError("no `make rebase` is under way and no version given",
                     "make rebase TO=<version>, e.g. TO=0.10.2")


def start(layout: Line,
          version: str,
          replay: ReplayPlan | None = None) -> RebaseState:
    """Check vllm-src, fetch and import the release, record the state.
    `replay`: what the new line's record decided already."""
    pin = refuse_same_version(layout, version)
    src = VllmSrc(layout.src)
    if not src.exists() or src.rev(SERIES) is None:
        init_repo(src)
        apply(layout)
    else:
        # No unfinished git command, no uncommitted or unexported work.
        ensure_safe_to_reset(layout, pin)
    names = read_series(layout)
    new = find_release(version, pin)
    tarball = fetch(new.sdist, new.sdist_sha256, layout.cache)
    new = BasePin(**{**asdict(new), "previous": (*pin.previous, pin.release)})
    src.git("checkout", "-q", SERIES)
    commits = src.series_commits(pin)
    if len(commits) != len(names):
        raise UserError(
            f"branch {SERIES} has {len(commits)} commits on {pin.tag} but "
            f"{layout.folder}/series lists {len(names)}",
            "run `make apply` first")
    old_tip = src.rev(SERIES)
    backup = f"backup/{SERIES}-{pin.tag}"
    src.git("branch", "-f", backup, old_tip)
    progress(f"old series kept on branch {backup}")
    subjects = src.subjects(src.series_range(pin))
    state = RebaseState(
        old_pin=pin,
        new_pin=new,
        old_tip=old_tip,
        old_upstream=src.rev(UPSTREAM) or src.rev(pin.tag),
        patches=[
            OldPatch(n, *fields)
            for n, fields in enumerate(zip(commits, names, subjects), 1)
        ])
    import_release(src, tarball, version, parent=src.rev(pin.tag))
    _find_absorbed(layout, src, state)
    if replay:
        _plan_replay(state, replay)
    state.save(src)
    return state


def _plan_replay(state: RebaseState, plan: ReplayPlan) -> None:
    """What the new line's record replays, by commit."""
    commit_of = {patch.name: patch.commit for patch in state.patches}
    for patch in state.patches:
        if patch.commit in state.absorbed:
            continue
        recorded = plan.replay.get(patch.name)
        if recorded is not None:
            state.replayed[patch.commit] = str(recorded.resolve())
        elif patch.name in plan.leave_out:
            state.left_out.append(patch.commit)
    for before, recorded in plan.insert:
        anchor = commit_of.get(before, "") if before else ""
        state.inserted.setdefault(anchor, []).append(str(recorded.resolve()))


def _find_absorbed(layout: Line, src: VllmSrc, state: RebaseState) -> None:
    """Check lines/upstream.toml against the new release's own tree. A
    line made by a carry names its patches' entries by the names of the
    patches they were carried from (its carried.toml), when they have none
    of their own."""
    findings = find(src, state.new_pin.tag,
                    read_upstream_entries(layout.upstream_record))
    source_of = {
        entry.patch: entry.source
        for entry in read_record(layout).carried if not entry.written_here
    }
    for patch in state.patches:
        finding = findings.get(patch.name) or findings.get(
            source_of.get(patch.name, ""))
        if finding is None:
            continue
        progress(f"{state.label(patch.commit)}: {finding.describe()}")
        if finding.absorbed:
            state.absorbed[patch.commit] = finding.describe()
        else:
            state.partly_absorbed[patch.commit] = finding.describe()


def step(layout: Line, state: RebaseState,
         config: tuple[str, ...] = ()) -> Stop | None:
    """Start the rebase, or continue it after a stop; None when it is
    complete."""
    src = VllmSrc(layout.src)
    op = src.operation_in_progress()
    if op == "git rebase":
        stop = Stop(_stopped_commit(src) or "", src.unmerged())
        if stop.files:
            return stop
        progress("continuing the rebase (git rebase --continue)")
        return run_rebase(src, state, ["--continue"], config)
    if op:
        raise UserError(
            f"a {op} is in progress in {src.path}, not the "
            "rebase", "finish or abort it first")
    if src.is_ancestor(state.new_pin.tag, SERIES):
        # Already rebased (e.g. finished with `git rebase --continue`).
        return None
    if src.rev(SERIES) != state.old_tip:
        raise UserError(f"branch {SERIES} moved since the rebase started",
                        "`make rebase-abort` and start again")
    old, new = state.old_pin.tag, state.new_pin.tag
    args = ["--committer-date-is-author-date", "--onto", new, old, SERIES]
    env = None
    if state.absorbed or state.replayed or state.left_out or state.inserted:
        # Interactive only to edit the todo list: absorbed patches (and
        # those the record leaves out) are dropped, recorded versions
        # replace their patches, patches written in the line are added.
        # (--empty=drop: patches already upstream are dropped, as without
        # --interactive, where that is the default.)
        args = ["--interactive", "--empty=drop", *args]
        env = TodoPlan(drop=[*state.absorbed, *state.left_out],
                       replay=state.replayed,
                       insert=state.inserted).environment()
        if state.absorbed:
            progress(f"leaving out {len(state.absorbed)} absorbed patch(es)")
        if state.left_out:
            progress(f"leaving out {len(state.left_out)} patch(es) as "
                     "recorded")
        if state.replayed:
            progress(f"replaying the recorded version of "
                     f"{len(state.replayed)} patch(es)")
        inserted = sum(len(files) for files in state.inserted.values())
        if inserted:
            progress(f"adding {inserted} patch(es) written in the line")
    progress(f"rebasing {len(state.patches)} patches: git rebase --onto "
             f"{new} {old} {SERIES}")
    return run_rebase(src, state, args, config, env)


def finish(layout: Line, state: RebaseState, range_diff: Path) -> Result:
    """The series is on the new base: pin it, re-export, re-apply, write
    the range-diff to `range_diff`."""
    src = VllmSrc(layout.src)
    new, old = state.new_pin, state.old_pin
    kept = src.subjects(f"{new.tag}..{SERIES}")
    upstreamed = {state.patch(c).subject for c in state.upstreamed}
    absorbed = {
        state.patch(c).subject: evidence
        for c, evidence in state.absorbed.items()
    }
    left_out = {state.patch(c).subject for c in state.left_out}
    gone = [p.subject for p in state.patches if p.subject not in kept]
    result = Result(version=new.version,
                    kept=kept,
                    dropped=[s for s in gone if s in upstreamed],
                    absorbed={s: absorbed[s]
                              for s in gone if s in absorbed},
                    left_out=[s for s in gone if s in left_out])
    # The other subjects that are gone were skipped, or renamed by the
    # person who resolved them: the count of kept patches tells which.
    explained = upstreamed | absorbed.keys() | left_out
    unexplained = [s for s in gone if s not in explained]
    inserted = sum(len(files) for files in state.inserted.values())
    num_skipped = (len(state.patches) + inserted - len(kept) -
                   len(result.dropped) - len(result.absorbed) -
                   len(result.left_out))
    if num_skipped:
        result.skipped = unexplained
    new.dump(layout.base_file)
    export(layout)
    apply(layout)
    # Hashes abbreviated to a fixed length: git's default grows with the
    # repository's object count, and a fresh clone's rebase must rewrite the
    # committed range-diff byte for byte.
    diff = src.git("-c", "core.abbrev=8", "range-diff", "--no-color",
                   f"{old.tag}..{state.old_tip}", f"{new.tag}..{SERIES}")
    range_diff.parent.mkdir(parents=True, exist_ok=True)
    result.range_diff = range_diff
    range_diff.write_text(
        f"# git range-diff {old.tag}..series {new.tag}..series: the series "
        "before and after\n"
        f"# the rebase onto vLLM {new.version}. '=' same patch, '!' changed "
        "(the diff of\n"
        "# the diffs follows), '<' dropped (absorbed or already upstream),\n"
        "# '>' new.\n\n" + diff)
    RebaseState.clear(src)
    return result


def abort(layout: Line) -> None:
    src = VllmSrc(layout.src)
    state = RebaseState.load(src) if src.exists() else None
    if state is None:
        raise UserError("no `make rebase` is under way",
                        f"see `git -C {src.path} status`")
    if (src.git_dir / "rebase-apply").exists():
        # A recorded version failed to apply: its `git am` waits too.
        src.git("am", "--abort", check=False)
    if src.operation_in_progress() == "git rebase":
        src.git("rebase", "--abort")
    dirty = src.uncommitted_changes()
    if dirty:
        raise UserError(
            f"{src.path} has uncommitted changes ({', '.join(dirty[:5])}); "
            "refusing to reset the series", "commit or stash them, then retry")
    tip = src.rev(SERIES)
    if tip != state.old_tip and src.is_ancestor(state.new_pin.tag, SERIES):
        # Rebased but not finished: back to the old series (the rebased one
        # is kept).
        src.git("branch", "-f", f"backup/{SERIES}-{state.new_pin.tag}-aborted",
                tip)
        src.git("checkout", "-q", "--detach")
        src.git("branch", "-f", SERIES, state.old_tip)
    src.git("checkout", "-q", SERIES)
    src.git("update-ref", f"refs/heads/{UPSTREAM}", state.old_upstream)
    src.git("tag", "-d", state.new_pin.tag, check=False)
    if layout.pin != state.old_pin:
        state.old_pin.dump(layout.base_file)
        print(f"note: {layout.folder}/base.toml restored; if "
              f"{layout.folder}/ was re-exported already, `git checkout -- "
              f"{layout.folder}/` restores it too")
    RebaseState.clear(src)
    progress(f"rebase onto {state.new_pin.tag} aborted: series, upstream and "
             f"the pin are back on {state.old_pin.tag}")


def rebase(layout: Line,
           version: str | None,
           replay: ReplayPlan | None = None,
           *,
           range_diff: Path,
           line_arg: str = "") -> Result:
    """Move the line of `layout` onto `version` in place: start, or continue
    after a stop, and finish. rebase.py runs it on a copy of a line;
    `replay` as for start(), `range_diff` as for finish(); `line_arg` (e.g.
    " LINE=0.10.2") goes into the make commands a stop names."""
    src = VllmSrc(layout.src)
    state = RebaseState.load(src) if src.exists() else None
    if state is None:
        if not version:
            raise no_version_given()
        state = start(layout, version, replay)
    elif version and version != state.new_pin.version:
        raise UserError(
            f"a rebase onto {state.new_pin.tag} is under way",
            f"finish it (`make rebase TO={state.new_pin.version}`) or "
            "`make rebase-abort`")
    stop = step(layout, state)
    if stop is not None:
        raise _stop_error(state, src, stop, line_arg)
    result = finish(layout, state, range_diff)
    for subject, evidence in result.absorbed.items():
        print(f"dropped ({evidence}): {subject}")
    for subject in result.dropped:
        print(f"dropped (already upstream): {subject}")
    for subject in result.skipped:
        print(f"dropped (skipped during the rebase): {subject}")
    for subject in result.left_out:
        print(f"dropped (left out, as the line records): {subject}")
    num_dropped = (len(result.dropped) + len(result.absorbed) +
                   len(result.skipped) + len(result.left_out))
    print(f"rebase: {len(result.kept)} patches on vLLM {result.version}, "
          f"{num_dropped} dropped")
    return result
