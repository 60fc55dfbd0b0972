"""`make rebase-report TO=<version>`: what `make rebase` would meet, tried
on a copy.

Runs the steps of `make rebase` in a scratch tree (build/rebase-report),
never in vllm-src, and goes past each conflict (taking the patch's side of
the conflicting hunks so that the later patches can still be tried). It
writes the generated part of docs/rebase-<version>.md, plus .conflicts.txt
with the conflicting hunks and .range-diff (flagging the patches whose
conflicts it resolved mechanically).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..core import markers
from ..core.errors import UserError, progress
from ..core.layout import Layout
from ..core.series import series_label
from ..core.vllm_src import VllmSrc
from .apply import apply
from .carry import RECORD, recorded_versions
from .rebase import (CONFLICT_KINDS, OldPatch, RebaseState, Result, finish,
                     run_rebase, start, step)

SCRATCH_MARK = ".pstack-scratch"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("versions",
                        nargs="*",
                        metavar="version",
                        help="the vLLM release to try the series on; with "
                        "several, each step starts from the last one's "
                        "result")
    parser.add_argument("--scratch",
                        type=Path,
                        help="scratch directory (default build/rebase-report)")


def run(args: argparse.Namespace, layout: Layout) -> int:
    if not args.versions:
        raise UserError(
            "which version? none given",
            "make rebase-report TO=0.10.0, or step by step: "
            "make rebase-report TO=\"0.10.0 0.10.1.1\"")
    scratch = args.scratch or layout.build / "rebase-report"
    if len(args.versions) == 1:
        report(layout, args.versions[0], scratch, layout.docs)
    else:
        report_steps(layout, args.versions, scratch, layout.docs)
    return 0


@dataclass
class Conflict:
    number: int  # of the patch in the old series, from 1
    subject: str
    files: dict[str, str]  # path -> git status code
    hunks: dict[str, list[str]]  # path -> "line N (in def/class)"
    diff: str


DEF = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+(\w+)")


def _conflict_hunks(path: Path) -> list[str]:
    """'line N in <enclosing def/class>' for each conflict region of a
    file."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except (FileNotFoundError, IsADirectoryError):
        return []
    hunks = []
    for i, line in enumerate(lines):
        if not line.startswith("<<<<<<< "):
            continue
        scope: list[str] = []
        indent = None
        for prev in reversed(lines[:i]):
            m = DEF.match(prev)
            if m:
                depth = len(prev) - len(prev.lstrip())
                if indent is None or depth < indent:
                    scope.insert(0, m.group(1))
                    indent = depth
                    if depth == 0:
                        break
        where = f" in {'.'.join(scope)}" if scope else ""
        hunks.append(f"line {i + 1}{where}")
    return hunks


def _take_patch_side(src: VllmSrc, files: dict[str, str]) -> None:
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
            tmp = src.git_dir / "pstack-merge"
            tmp.mkdir(exist_ok=True)
            for n in (1, 2, 3):
                content = (src.git("cat-file", "blob", stages[n])
                           if n in stages else "")
                (tmp / str(n)).write_text(content)
            merged = subprocess.run([
                "git", "merge-file", "-p", "--theirs",
                str(tmp / "2"),
                str(tmp / "1"),
                str(tmp / "3")
            ],
                                    text=True,
                                    stdout=subprocess.PIPE).stdout
            (src.path / path).write_text(merged)
        src.git("add", "--", path)


def _upstream_changes(src: VllmSrc, old: str, new: str) -> dict[str, str]:
    """path at `old` -> how upstream changed it by `new` (+a -b, deleted,
    renamed)."""
    changes = {}
    for line in src.git("diff", "--numstat", "-M", old, new).splitlines():
        added, deleted, path = line.split("\t", 2)
        if " => " in path:
            m = re.match(r"(.*)\{(.*) => (.*)\}(.*)", path)
            if m:
                a = f"{m[1]}{m[2]}{m[4]}".replace("//", "/")
                b = f"{m[1]}{m[3]}{m[4]}".replace("//", "/")
            else:
                a, b = path.split(" => ")
            changes[a] = f"renamed to {b}, +{added} -{deleted}"
        else:
            changes[path] = f"+{added} -{deleted}"
    deleted = src.git("diff", "--name-status", "--no-renames",
                      "--diff-filter=D", old, new)
    for line in deleted.splitlines():
        changes.setdefault(line.split("\t", 1)[1], "deleted")
    return changes


@dataclass
class StepReport:
    """One release of a report: its doc and what happened to each patch."""

    version: str
    from_version: str
    doc: Path
    outcomes: dict[str, str]  # subject -> short outcome, see _outcome


def report(layout: Layout, version: str, scratch: Path, docs: Path) -> Path:
    """Rebase a copy of the series in `scratch`, write
    docs/rebase-<version>.md etc."""
    return _report_step(_scratch_copy(layout, scratch),
                        version,
                        docs,
                        recorded=_recorded(layout, version)).doc


def report_steps(layout: Layout, versions: list[str], scratch: Path,
                 docs: Path) -> Path:
    """Rebase a copy of the series onto each release in turn, each step
    from the last one's result; write each step's report and
    docs/rebase-steps-<last version>.md, a table of every patch's outcome
    at each step."""
    copy = _scratch_copy(layout, scratch)
    base = series_label(copy)
    # Each step's report is regenerated by the whole chain, since it starts
    # from the previous step's result.
    command = _command(versions)
    steps = [
        _report_step(copy, version, docs, command, _recorded(layout, version))
        for version in versions
    ]
    doc = docs / f"rebase-steps-{versions[-1]}.md"
    _write_generated(doc, _steps_block(base, steps),
                     f"Rebase onto vLLM {versions[-1]}, step by step", command)
    print(f"rebase-report: {len(steps)} steps; wrote {doc}")
    return doc


def _recorded(layout: Layout, version: str) -> dict[str, str]:
    """Patch file name -> the version of it that the checkout's line on
    `version` records (patches-<version>/carried.toml): `make rebase
    TO=<version>` replays those instead of asking anyone to resolve them.
    Empty without such a line, or while the record is stale."""
    line = layout.line(version)
    if not (line.patches / RECORD).is_file():
        return {}
    try:
        replay = recorded_versions(layout, line)
    except UserError as e:
        progress(f"not using {line.patches.name}/'s record: {e}")
        return {}
    return {
        source: f"{line.patches.name}/{recorded.name}"
        for source, recorded in replay.items()
    }


def _scratch_copy(layout: Layout, scratch: Path) -> Layout:
    """A fresh scratch tree with the series applied."""
    if scratch.exists():
        if not (scratch / SCRATCH_MARK).exists():
            raise UserError(f"{scratch} exists and was not made by the report",
                            "move it away or pass another --scratch")
        shutil.rmtree(scratch)
    scratch.mkdir(parents=True)
    (scratch /
     SCRATCH_MARK).write_text("made by `make rebase-report`; safe to delete\n")
    shutil.copytree(layout.patches, scratch / "patches")
    copy = Layout(patches=scratch / "patches",
                  src=scratch / "vllm-src",
                  cache=layout.cache)
    progress(f"scratch tree {scratch}: the series as it is in "
             f"{layout.patches}")
    apply(copy)
    return copy


def _report_step(copy: Layout,
                 version: str,
                 docs: Path,
                 command: str | None = None,
                 recorded: dict[str, str] | None = None) -> StepReport:
    """Rebase the scratch tree's series onto `version` and write
    docs/rebase-<version>.md etc., naming `command` as the one that
    regenerates it (default: the report of this version alone). A
    conflicting patch in `recorded` (see _recorded) is reported as
    resolved, with the file that holds its resolution."""
    recorded = recorded or {}
    src = VllmSrc(copy.src)
    label = series_label(copy)
    state = start(copy, version)
    conflicts: list[Conflict] = []
    config = ("merge.conflictStyle=diff3", )
    stop = step(copy, state, config)
    seen = set()
    while stop is not None:
        if (stop.commit, tuple(stop.files)) in seen:
            raise UserError(
                f"the report could not get past {state.label(stop.commit)}",
                f"look at `git -C {src.path} status`")
        seen.add((stop.commit, tuple(stop.files)))
        if not stop.files:  # e.g. nothing left to commit once resolved
            stop = run_rebase(src, state, ["--skip"], config)
            continue
        progress(f"{state.label(stop.commit)} conflicts: "
                 f"{', '.join(stop.files)}")
        patch = state.patch(stop.commit)
        conflicts.append(
            Conflict(patch.number, patch.subject, stop.files,
                     {f: _conflict_hunks(src.path / f)
                      for f in stop.files},
                     src.git("diff", "--no-color", "--", *stop.files)))
        _take_patch_side(src, stop.files)
        stop = step(copy, state, config)
    changes = _upstream_changes(src, state.old_pin.tag, state.new_pin.tag)
    result = finish(copy, state, copy.root / "docs")
    docs.mkdir(parents=True, exist_ok=True)
    stem = f"rebase-{version}"
    range_diff = docs / f"{stem}.range-diff"
    details = docs / f"{stem}.conflicts.txt"
    caveat = ""
    if conflicts:
        details.write_text(_conflict_details(state, conflicts))
        numbers = ", ".join(str(c.number) for c in conflicts)
        caveat = (f"# The conflicting hunks of patches {numbers} were "
                  "resolved to the patch's side, unreviewed: their entries "
                  "show that mechanical resolution, a starting point.\n")
    else:
        details.unlink(missing_ok=True)
    range_diff.write_text(caveat + result.range_diff.read_text())
    block = _report_block(state, label, result, conflicts, changes, range_diff,
                          details if conflicts else None, recorded)
    doc = docs / f"{stem}.md"
    _write_generated(doc, block, f"Rebase onto vLLM {version}", command
                     or _command([version]))
    clean = (len(state.patches) - len(conflicts) - len(result.dropped) -
             len(result.absorbed))
    print(f"rebase-report: {clean} clean, {len(conflicts)} conflicting, "
          f"{len(result.absorbed)} absorbed upstream, "
          f"{len(result.dropped)} already upstream; wrote {doc}")
    return StepReport(
        version, state.old_pin.version, doc, {
            p.subject: _outcome(state, result, conflicts, p, recorded)
            for p in state.patches
        })


def _outcome(state: RebaseState, result: Result, conflicts: list[Conflict],
             patch: OldPatch, recorded: dict[str, str]) -> str:
    """What happened to one patch, in a few words."""
    subject = patch.subject
    if subject in result.absorbed:
        return "absorbed"
    if subject in result.dropped:
        return "already upstream"
    if subject in result.skipped:
        return "empty, dropped"
    outcome = ("conflict" if any(c.number == patch.number
                                 for c in conflicts) else "applied")
    if outcome == "conflict" and patch.name in recorded:
        outcome = "conflict resolved (recorded)"
    if patch.commit in state.partly_absorbed:
        outcome = f"partly absorbed, {outcome}"
    return outcome


def _steps_block(base: str, steps: list[StepReport]) -> str:
    subjects = list(steps[0].outcomes)
    header = " | ".join(f"{s.from_version} → {s.version}" for s in steps)
    lines = [
        f"The series `{base}`, rebased onto each release in turn: each step "
        "starts from the previous step's result, where the conflicting "
        "hunks were resolved to the patch's side (unreviewed). *conflict "
        "resolved (recorded)*: the checkout's line on that release holds "
        "the patch resolved by hand, and `make rebase` replays it. "
        "*absorbed*: "
        "left out, the release has it in its own form (evidence in the "
        "step's report, from patches/upstream.toml); *partly absorbed*: the "
        "release has some of it, the patch still applies; *already "
        "upstream*: its diff is in the release; —: gone at an earlier step.",
        "",
        f"| # | patch | {header} |",
        "|---|---|" + "---|" * len(steps),
    ]
    for number, subject in enumerate(subjects, 1):
        cells = [s.outcomes.get(subject, "—") for s in steps]
        cells = [f"**{c}**" if "conflict" in c else c for c in cells]
        lines.append(f"| {number} | {subject} | {' | '.join(cells)} |")
    lines += [
        "",
        "Each step's report: " + ", ".join(f"`{s.doc.name}`" for s in steps) +
        " (with its `.range-diff` and `.conflicts.txt`).",
        "",
    ]
    return "\n".join(lines)


def _conflict_details(state: RebaseState, conflicts: list[Conflict]) -> str:
    out = [
        f"# Conflicts of the series ({len(state.patches)} patches) rebased "
        f"from {state.old_pin.tag} onto {state.new_pin.tag}",
        "# `git diff` at each stop (diff3 style: ours = new upstream + "
        "earlier patches,",
        "# base = the patch's parent, theirs = the patch). Generated by",
        f"# `make rebase-report TO={state.new_pin.version}`.", ""
    ]
    limit = 250  # lines per file
    for c in conflicts:
        out.append(f"=== patch {c.number}/{len(state.patches)}: {c.subject}")
        for part in re.split(r"(?m)^(?=diff --cc )", c.diff):
            lines = part.splitlines()
            out.extend(lines[:limit])
            if len(lines) > limit:
                out.append(f"... ({len(lines) - limit} more lines of this "
                           "file's diff)")
        out.append("")
    return "\n".join(out) + "\n"


def _status(state: RebaseState, result: Result, conflicts: list[Conflict],
            patch: OldPatch, recorded: dict[str, str]) -> str:
    """What happened to one patch, for the report's table."""
    number, subject = patch.number, patch.subject
    if subject in result.absorbed:
        return f"dropped: {result.absorbed[subject]}"
    partly = state.partly_absorbed.get(patch.commit)
    prefix = f"{partly}; " if partly else ""
    by_number = {c.number: c for c in conflicts}
    if number in by_number:
        status = prefix + "**conflict**: " + ", ".join(
            f"`{f}`" for f in by_number[number].files)
        if patch.name in recorded:
            status += (f"; resolved in `{recorded[patch.name]}` (recorded: "
                       "`make rebase` replays it)")
        return status
    if subject in result.dropped:
        return "dropped: already upstream (its diff is in the release)"
    if subject in result.skipped:
        return "dropped: empty once the conflicts before it were resolved"
    if any(c.number < number for c in conflicts):
        return prefix + ("applies cleanly (after the conflicts above it, "
                         "resolved to the patch's side)")
    return prefix + "applies cleanly"


def _report_block(state: RebaseState, label: str, result: Result,
                  conflicts: list[Conflict], changes: dict[str, str],
                  range_diff: Path | None, details: Path | None,
                  recorded: dict[str, str]) -> str:
    old, new = state.old_pin, state.new_pin
    rows = [
        f"| {p.number} | {p.subject} | "
        f"{_status(state, result, conflicts, p, recorded)} |"
        for p in state.patches
    ]
    lines = [
        f"Generated from the series `{label}` ({len(state.patches)} patches "
        f"on {old.tag}), rebased onto {new.tag} (`{new.sdist}`, sha256 "
        f"`{new.sdist_sha256[:16]}…`):",
        "",
        "| # | patch | onto " + new.tag + " |",
        "|---|---|---|",
        *rows,
        "",
    ]
    if conflicts:
        lines += [
            "After a conflict the report resolves the conflicting hunks to "
            "the patch's side (`git merge-file --theirs`) and goes on, so "
            "every later patch is still tried; `make rebase` itself stops at "
            "the first conflict.",
            "",
        ]
    for c in conflicts:
        lines += [
            f"#### Conflict in patch {c.number}: {c.subject}", "",
            "| file | conflicting hunks (diff3 markers) | upstream "
            f"{old.tag} → {new.tag} |", "|---|---|---|"
        ]
        for f, code in c.files.items():
            hunks = "; ".join(
                c.hunks.get(f) or [CONFLICT_KINDS.get(code, code)])
            lines.append(
                f"| `{f}` | {hunks} | {changes.get(f, 'unchanged')} |")
        lines.append("")
    if details:
        lines += [f"Hunks in full: `{details.name}`.", ""]
    if range_diff:
        lines += [
            f"Range-diff of the old and new series: `{range_diff.name}`.", ""
        ]
    return "\n".join(lines)


def _command(versions: list[str]) -> str:
    """The command that regenerates a report of these steps."""
    if len(versions) == 1:
        return f"make rebase-report TO={versions[0]}"
    return f'make rebase-report TO="{" ".join(versions)}"'


def _write_generated(doc: Path, block: str, title: str, command: str) -> None:
    """The block between the markers of `doc`, which is created (or the
    section appended) if needed; the text outside is kept."""
    prefix = "make rebase-report"
    if not doc.exists():
        doc.write_text(f"# {title}\n\n## Result\n\n"
                       f"{markers.begin_marker(command)}\n{block}\n"
                       f"{markers.END}\n")
        return
    text = doc.read_text()
    new = markers.replace_section(text, command, block, prefix)
    if new is None:
        new = (text.rstrip("\n") + "\n\n" + markers.begin_marker(command) +
               f"\n{block}\n{markers.END}\n")
    doc.write_text(new)
