"""The text of the rebase reports, rendered from the walk's results
(rebase_walk.py); nothing here decides what happened to a patch.

Three kinds: the block of docs/reports/<version>/report.md (a table of the
patches, then each conflict's files and hunks), its report.conflicts.txt
(the hunks in full) and report.range-diff, and the block of
docs/reports/<last version>/report-steps.md (a table of each patch's fate
at each step).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..core import markers
from .rebase_in_place import CONFLICT_KINDS
from .rebase_walk import Conflict, Fate, PatchFate, StepResult

# Lines of each file's conflicting diff that report.conflicts.txt shows.
DIFF_LINES_PER_FILE = 250

REPLAYS = "(recorded: `make rebase` replays it)"
AFTER_CONFLICTS = ("(after the conflicts above it, resolved to the patch's "
                   "side)")


def status(fate: PatchFate) -> str:
    """What happened to one patch, for the table of its step's report."""
    partly = f"{fate.evidence}; " if fate.evidence else ""
    if fate.fate is Fate.ABSORBED:
        return f"dropped: {fate.evidence}"
    if fate.fate is Fate.UPSTREAM:
        return "dropped: already upstream (its diff is in the release)"
    if fate.fate is Fate.EMPTY:
        return "dropped: empty once the conflicts before it were resolved"
    if fate.fate is Fate.APPLIED:
        after = f" {AFTER_CONFLICTS}" if fate.after_conflicts else ""
        return f"{partly}applies cleanly{after}"
    files = ", ".join(f"`{f}`" for f in fate.conflict.files)
    resolved = (f"; resolved in `{fate.recorded}` {REPLAYS}"
                if fate.fate is Fate.RESOLVED else "")
    return f"{partly}**conflict**: {files}{resolved}"


def outcome(fate: PatchFate | None) -> str:
    """What happened to one patch, in a few words, for the step-by-step
    table (None: gone at an earlier step).

    >>> outcome(None)
    '—'
    """
    if fate is None:
        return "—"
    text = fate.fate.value
    if fate.evidence and fate.fate is not Fate.ABSORBED:
        text = f"partly absorbed, {text}"
    return f"**{text}**" if fate.fate.conflicted else text


def report_block(step: StepResult, range_diff: str,
                 details: str | None) -> str:
    """The generated part of a step's report; `range_diff` and `details`
    name the files beside it."""
    old, new = step.old, step.new
    lines = [
        f"Generated from the series `{step.label}` ({len(step.fates)} "
        f"patches on {old.tag}), rebased onto {new.tag} (`{new.sdist}`, "
        f"sha256 `{new.sdist_sha256[:16]}…`):",
        "",
        "| # | patch | onto " + new.tag + " |",
        "|---|---|---|",
        *(f"| {f.patch.number} | {f.patch.subject} | {status(f)} |"
          for f in step.fates),
        "",
    ]
    if step.conflicts:
        lines += [
            "After a conflict the report resolves the conflicting hunks to "
            "the patch's side (`git merge-file --theirs`) and goes on, so "
            "every later patch is still tried; `make rebase` itself stops at "
            "the first conflict.",
            "",
        ]
    for c in step.conflicts:
        lines += _conflict_table(step, c)
    if details:
        lines += [f"Hunks in full: [`{details}`]({details}).", ""]
    lines += [
        f"Range-diff of the old and new series: [`{range_diff}`]"
        f"({range_diff}).", ""
    ]
    return "\n".join(lines)


def _conflict_table(step: StepResult, c: Conflict) -> list[str]:
    lines = [
        f"#### Conflict in patch {c.number}: {c.subject}", "",
        "| file | conflicting hunks (diff3 markers) | upstream "
        f"{step.old.tag} → {step.new.tag} |", "|---|---|---|"
    ]
    for f, code in c.files.items():
        hunks = "; ".join(c.hunks.get(f) or [CONFLICT_KINDS.get(code, code)])
        lines.append(
            f"| `{f}` | {hunks} | {step.changes.get(f, 'unchanged')} |")
    return lines + [""]


def steps_block(steps: list[StepResult], docs: list[Path],
                steps_doc: Path) -> str:
    """The generated part of report-steps.md (`steps_doc`): each patch's
    outcome at each step; `docs` are the steps' reports."""
    header = " | ".join(f"{s.old.version} → {s.new.version}" for s in steps)
    fates = [{f.patch.subject: f for f in s.fates} for s in steps]
    lines = [
        f"The series `{steps[0].label}`, rebased onto each release in turn: "
        "each step starts from the previous step's result, where the "
        "conflicting hunks were resolved to the patch's side (unreviewed). "
        "*conflict resolved (recorded)*: the checkout's line on that "
        "release holds the patch resolved by hand, and `make rebase` "
        "replays it. *absorbed*: left out, the release has it in its own "
        "form (evidence in the step's report, from patches/upstream.toml); "
        "*partly absorbed*: the release has some of it, the patch still "
        "applies; *already upstream*: its diff is in the release; —: gone "
        "at an earlier step.",
        "",
        f"| # | patch | {header} |",
        "|---|---|" + "---|" * len(steps),
    ]
    for f in steps[0].fates:
        subject = f.patch.subject
        cells = " | ".join(outcome(by.get(subject)) for by in fates)
        lines.append(f"| {f.patch.number} | {subject} | {cells} |")
    links = ", ".join(f"[{s.new.version}]({_relative(doc, steps_doc.parent)})"
                      for s, doc in zip(steps, docs))
    lines += [
        "",
        f"Each step's report: {links} (each with its `report.range-diff` "
        "and `report.conflicts.txt` beside it).",
        "",
    ]
    return "\n".join(lines)


def _relative(path: Path, start: Path) -> str:
    """`path` as a link from a document in `start`.

    >>> _relative(Path("docs/reports/0.10.0/report.md"),
    ...           Path("docs/reports/0.10.2"))
    '../0.10.0/report.md'
    """
    return Path(os.path.relpath(path, start)).as_posix()


def conflict_details(step: StepResult) -> str:
    """report.conflicts.txt: the `git diff` at each conflict, in full (up to
    DIFF_LINES_PER_FILE lines per file)."""
    total = len(step.fates)
    out = [
        f"# Conflicts of the series ({total} patches) rebased "
        f"from {step.old.tag} onto {step.new.tag}",
        "# `git diff` at each stop (diff3 style: ours = new upstream + "
        "earlier patches,",
        "# base = the patch's parent, theirs = the patch). Generated by",
        f"# `make rebase-report TO={step.new.version}`.", ""
    ]
    for c in step.conflicts:
        out.append(f"=== patch {c.number}/{total}: {c.subject}")
        for part in re.split(r"(?m)^(?=diff --cc )", c.diff):
            lines = part.splitlines()
            out.extend(lines[:DIFF_LINES_PER_FILE])
            if len(lines) > DIFF_LINES_PER_FILE:
                out.append(f"... ({len(lines) - DIFF_LINES_PER_FILE} more "
                           "lines of this file's diff)")
        out.append("")
    return "\n".join(out) + "\n"


def range_diff(step: StepResult) -> str:
    """report.range-diff: the step's range-diff, flagged when it shows
    mechanical resolutions."""
    if not step.conflicts:
        return step.range_diff
    numbers = ", ".join(str(c.number) for c in step.conflicts)
    return (f"# The conflicting hunks of patches {numbers} were resolved to "
            "the patch's side, unreviewed: their entries show that "
            "mechanical resolution, a starting point.\n" + step.range_diff)


def command(versions: list[str]) -> str:
    """The command that regenerates a report of these steps.

    >>> command(["0.10.0"])
    'make rebase-report TO=0.10.0'
    >>> command(["0.10.0", "0.10.2"])
    'make rebase-report TO="0.10.0 0.10.2"'
    """
    if len(versions) == 1:
        return f"make rebase-report TO={versions[0]}"
    return f'make rebase-report TO="{" ".join(versions)}"'


def with_generated(text: str | None, block: str, title: str,
                   command: str) -> str:
    """`text` (None: a new document titled `title`) with `block` between
    the markers of `command`'s section, appended if there is none; the
    text outside the markers is kept.

    >>> new = with_generated(None, "B", "T", "make rebase-report TO=1")
    >>> print(new.replace("; edit outside these markers", ""))
    # T
    <BLANKLINE>
    ## Result
    <BLANKLINE>
    <!-- BEGIN generated by `make rebase-report TO=1` -->
    B
    <!-- END generated -->
    <BLANKLINE>
    >>> again = with_generated("Notes " + new, "C", "T",
    ...                        "make rebase-report TO=1").splitlines()
    >>> again[0], again[5:7]
    ('Notes # T', ['C', '<!-- END generated -->'])
    """
    section = f"{markers.begin_marker(command)}\n{block}\n{markers.END}\n"
    if text is None:
        return f"# {title}\n\n## Result\n\n{section}"
    new = markers.replace_section(text, command, block, "make rebase-report")
    if new is None:
        new = text.rstrip("\n") + "\n\n" + section
    return new
