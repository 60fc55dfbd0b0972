"""Walk a rebase past its conflicts, on a scratch copy of the series, and
say what happened to each patch.

`make rebase-report` runs the steps of `make rebase` (rebase_in_place.py)
in a scratch tree, never in vllm-src. At each conflict it records the
conflicting files and hunks, resolves them to the patch's side (`git
merge-file --theirs`) so that the later patches can still be tried, and
goes on. Each step returns a StepResult: the Fate of every patch of the
series, decided once here; rebase_render.py only renders it.
"""

from __future__ import annotations

import enum
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import UserError, progress
from ..core.line import LINES, Line
from ..core.pin import BasePin
from ..core.series import series_label
from ..core.vllm_src import VllmSrc
from .apply import apply
from .carried import CARRIED_TOML, recorded_versions
from .rebase_in_place import (OldPatch, RebaseState, Result, Stop, finish,
                              run_rebase, start, step)

SCRATCH_MARK = ".pstack-scratch"

# Conflicts come out in diff3 style: ours, the patch's parent, theirs.
MERGE_CONFIG = ("merge.conflictStyle=diff3", )

DEF = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+(\w+)")

# ---------------------------------------------------------------- results


class Fate(enum.Enum):
    """What a rebase did to one patch. The value is the short form the
    step-by-step table shows."""

    APPLIED = "applied"
    CONFLICT = "conflict"
    # Conflicted, and the checkout's line on the release records the
    # patch resolved by hand: `make rebase` replays that.
    RESOLVED = "conflict resolved (recorded)"
    ABSORBED = "absorbed"  # left out: upstream has it in its own form
    UPSTREAM = "already upstream"  # its diff is in the release
    EMPTY = "empty, dropped"  # nothing left once earlier conflicts resolved

    @property
    def conflicted(self) -> bool:
        return self in (Fate.CONFLICT, Fate.RESOLVED)


@dataclass(frozen=True)
class Conflict:
    number: int  # of the patch in the old series, from 1
    subject: str
    files: dict[str, str]  # path -> git status code
    hunks: dict[str, list[str]]  # path -> "line N (in def/class)"
    diff: str


@dataclass(frozen=True)
class PatchFate:
    """One patch of a step, its Fate and the facts the reports show."""

    patch: OldPatch
    fate: Fate
    # What the release has of the patch (upstream.toml's evidence): why it
    # is ABSORBED, or, for the patches still applied, what it has already.
    evidence: str | None = None
    conflict: Conflict | None = None  # CONFLICT and RESOLVED
    recorded: str | None = None  # RESOLVED: the file with the resolution
    after_conflicts: bool = False  # an earlier patch of the step conflicted


@dataclass(frozen=True)
class StepResult:
    """One release of a report: the series moved onto it."""

    label: str  # the series' label before the step
    old: BasePin
    new: BasePin
    fates: list[PatchFate]  # every patch of the series before the step
    conflicts: list[Conflict]
    changes: dict[str, str]  # path -> how upstream changed it, old -> new
    range_diff: str  # `git range-diff` of the series before and after


def fate_of(patch: OldPatch, state: RebaseState, result: Result,
            conflicts: list[Conflict], recorded: dict[str, str]) -> PatchFate:
    """The fate of `patch` in a finished step. A patch that conflicted is a
    conflict even if it ended empty: its conflict is what there is to
    resolve. `recorded` as recorded_resolutions() returns it."""
    subject = patch.subject
    if subject in result.absorbed:
        return PatchFate(patch, Fate.ABSORBED, result.absorbed[subject])
    if subject in result.dropped:
        return PatchFate(patch, Fate.UPSTREAM)
    conflict = next((c for c in conflicts if c.number == patch.number), None)
    if conflict is None and subject in result.skipped:
        return PatchFate(patch, Fate.EMPTY)
    partly = state.partly_absorbed.get(patch.commit)
    if conflict is None:
        after = any(c.number < patch.number for c in conflicts)
        return PatchFate(patch, Fate.APPLIED, partly, after_conflicts=after)
    resolution = recorded.get(patch.name)
    fate = Fate.CONFLICT if resolution is None else Fate.RESOLVED
    return PatchFate(patch, fate, partly, conflict, resolution)


# ---------------------------------------------------------------- the walk


def scratch_copy(layout: Line, scratch: Path) -> Line:
    """A fresh scratch tree with the series applied."""
    if scratch.exists():
        if not (scratch / SCRATCH_MARK).exists():
            raise UserError(f"{scratch} exists and was not made by the report",
                            "move it away or pass another --scratch")
        shutil.rmtree(scratch)
    scratch.mkdir(parents=True)
    (scratch /
     SCRATCH_MARK).write_text("made by `make rebase-report`; safe to delete\n")
    copy = Line(patches=scratch / LINES / layout.version,
                src=scratch / "vllm-src",
                cache=layout.cache,
                root=scratch)
    shutil.copytree(layout.patches, copy.patches)
    if layout.upstream_record.exists():
        shutil.copyfile(layout.upstream_record, copy.upstream_record)
    progress(f"scratch tree {scratch}: the series as it is in "
             f"{layout.patches}")
    apply(copy)
    return copy


def recorded_resolutions(layout: Line, version: str) -> dict[str, str]:
    """Patch file name -> the version of it that the checkout's line on
    `version` records (lines/<version>/carried.toml): `make rebase
    TO=<version>` replays those instead of asking anyone to resolve them.
    Empty without such a line, or while the record is stale."""
    line = layout.line(version)
    if not (line.patches / CARRIED_TOML).is_file():
        return {}
    try:
        replay = recorded_versions(layout, line)
    except UserError as e:
        progress(f"not using {line.folder}/'s record: {e}")
        return {}
    return {
        source: f"{line.folder}/{recorded.name}"
        for source, recorded in replay.items()
    }


def walk_step(copy: Line, version: str, recorded: dict[str,
                                                       str]) -> StepResult:
    """Rebase the scratch tree's series onto `version`, past every
    conflict, and finish: the series of `copy` is then on `version`."""
    src = VllmSrc(copy.src)
    label = series_label(copy)
    state = start(copy, version)
    conflicts = _rebase_past_conflicts(copy, state)
    changes = upstream_changes(src, state.old_pin.tag, state.new_pin.tag)
    result = finish(copy, state, copy.root / "report.range-diff")
    return StepResult(label, state.old_pin, state.new_pin, [
        fate_of(p, state, result, conflicts, recorded) for p in state.patches
    ], conflicts, changes, result.range_diff.read_text())


def _rebase_past_conflicts(copy: Line, state: RebaseState) -> list[Conflict]:
    """Run the rebase to its end, resolving each conflict to the patch's
    side; the conflicts, in order."""
    src = VllmSrc(copy.src)
    conflicts: list[Conflict] = []
    seen = set()
    stop = step(copy, state, MERGE_CONFIG)
    while stop is not None:
        if (stop.commit, tuple(stop.files)) in seen:
            raise UserError(
                f"the report could not get past {state.label(stop.commit)}",
                f"look at `git -C {src.path} status`")
        seen.add((stop.commit, tuple(stop.files)))
        if not stop.files:  # e.g. nothing left to commit once resolved
            stop = run_rebase(src, state, ["--skip"], MERGE_CONFIG)
            continue
        conflicts.append(_record_conflict(src, state, stop))
        take_patch_side(src, stop.files)
        stop = step(copy, state, MERGE_CONFIG)
    return conflicts


def _record_conflict(src: VllmSrc, state: RebaseState, stop: Stop) -> Conflict:
    """The conflict the rebase stopped at, before it is resolved."""
    progress(f"{state.label(stop.commit)} conflicts: "
             f"{', '.join(stop.files)}")
    patch = state.patch(stop.commit)
    return Conflict(patch.number, patch.subject, stop.files,
                    {f: conflict_hunks(src.path / f)
                     for f in stop.files},
                    src.git("diff", "--no-color", "--", *stop.files))


# ---------------------------------------------------------------- git


def conflict_hunks(path: Path) -> list[str]:
    """'line N in <enclosing def/class>' for each conflict region of a
    file."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except (FileNotFoundError, IsADirectoryError):
        return []
    return [
        f"line {i + 1}{_scope(lines[:i])}" for i, line in enumerate(lines)
        if line.startswith("<<<<<<< ")
    ]


def _scope(before: list[str]) -> str:
    """' in Outer.inner': the defs and classes that enclose the line after
    `before` ('' at module level).

    >>> _scope(["class A:", "    x = 1", "    def f(self):", "        y"])
    ' in A.f'
    >>> _scope(["import os"])
    ''
    """
    scope: list[str] = []
    indent = None
    for prev in reversed(before):
        m = DEF.match(prev)
        if m:
            depth = len(prev) - len(prev.lstrip())
            if indent is None or depth < indent:
                scope.insert(0, m.group(1))
                indent = depth
                if depth == 0:
                    break
    return f" in {'.'.join(scope)}" if scope else ""


def take_patch_side(src: VllmSrc, files: dict[str, str]) -> None:
    """Resolve conflicts in favour of the patch, hunk by hunk."""
    for path in files:
        stages = {}
        for line in src.git("ls-files", "-u", "--", path).splitlines():
            meta, _ = line.split("\t", 1)
            _, sha, stage = meta.split()
            stages[int(stage)] = sha
        if 3 not in stages:  # the patch deleted it
            src.git("rm", "-q", "--cached", "--", path)
            (src.path / path).unlink(missing_ok=True)
            continue
        if 2 not in stages:  # deleted upstream: keep the patch's file
            src.git("checkout", "--theirs", "--", path)
        else:
            (src.path / path).write_text(_merge_theirs(src, stages))
        src.git("add", "--", path)


def _merge_theirs(src: VllmSrc, stages: dict[int, str]) -> str:
    """The three-way merge of a file's stages, conflicts resolved to
    theirs (the patch)."""
    tmp = src.git_dir / "pstack-merge"
    tmp.mkdir(exist_ok=True)
    for n in (1, 2, 3):
        content = src.git("cat-file", "blob", stages[n]) if n in stages else ""
        (tmp / str(n)).write_text(content)
    return subprocess.run([
        "git", "merge-file", "-p", "--theirs",
        str(tmp / "2"),
        str(tmp / "1"),
        str(tmp / "3")
    ],
                          text=True,
                          stdout=subprocess.PIPE).stdout


def upstream_changes(src: VllmSrc, old: str, new: str) -> dict[str, str]:
    """path at `old` -> how upstream changed it by `new` (+a -b, deleted,
    renamed)."""
    changes = {}
    for line in src.git("diff", "--numstat", "-M", old, new).splitlines():
        added, deleted, path = line.split("\t", 2)
        if " => " in path:
            a, b = renamed_paths(path)
            changes[a] = f"renamed to {b}, +{added} -{deleted}"
        else:
            changes[path] = f"+{added} -{deleted}"
    deleted = src.git("diff", "--name-status", "--no-renames",
                      "--diff-filter=D", old, new)
    for line in deleted.splitlines():
        changes.setdefault(line.split("\t", 1)[1], "deleted")
    return changes


def renamed_paths(numstat_path: str) -> tuple[str, str]:
    """The old and new path of a rename as `git diff --numstat -M` names it.

    >>> renamed_paths("vllm/{a => b}/x.py")
    ('vllm/a/x.py', 'vllm/b/x.py')
    >>> renamed_paths("vllm/{ => sub}/x.py")
    ('vllm/x.py', 'vllm/sub/x.py')
    >>> renamed_paths("old.py => new.py")
    ('old.py', 'new.py')
    """
    m = re.match(r"(.*)\{(.*) => (.*)\}(.*)", numstat_path)
    if not m:
        a, b = numstat_path.split(" => ")
        return a, b
    return (f"{m[1]}{m[2]}{m[4]}".replace("//", "/"),
            f"{m[1]}{m[3]}{m[4]}".replace("//", "/"))
