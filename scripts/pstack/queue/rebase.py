"""`make rebase TO=<version>`: carry a line of the stack onto a newer vLLM
release, as a line of its own.

The line carried stays as it is: the one LINE=<version> names, else the
line the line on TO records it was carried from, else the newest. The new
line is written beside it (see Line.line): lines/<version>/ with its pin,
series and patches, and vllm-src-<version>/ with them applied. The work
happens on a copy of the carried line's patches in build/carry-<version>/,
rebased in place in
vllm-src-<version>/ by rebase_in_place.py: a conflict stops there, and `make
rebase TO=<version>` continues once a person has resolved it. The
range-diff of the line carried and the new one goes to
docs/reports/<version>/carry.range-diff.

Resolutions are made once. The new line's carried.toml (carried.py) records,
for each of its patches, the patch of the carried line it comes from and
that file's sha256. Carrying again (from a fresh clone, say) replaces every
patch whose source is unchanged by its recorded version, so that the new
line comes out byte for byte as committed and no one is asked anything. A
recorded patch whose source changed since is refused before anything is
touched: carried mechanically, it would silently lose what was resolved by
hand.
"""

from __future__ import annotations

import argparse
import os
import shutil

from ..core.errors import UserError, progress
from ..core.line import LINES, Line
from ..core.series import read_patches, read_series
from ..core.vllm_src import VllmSrc
from .apply import apply
from .carried import (CARRIED_TOML, CarriedPatch, Record, ReplayPlan,
                      carried_from, left_out_of, read_record, replay_plan,
                      write_record)
from .guard import ensure_safe_to_reset
from .rebase_in_place import (RebaseState, Result, abort, no_version_given,
                              rebase, refuse_same_version)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("version",
                        nargs="?",
                        help="the vLLM release to carry the line onto")
    parser.add_argument("--abort",
                        action="store_true",
                        help="undo a carry under way")


def run(args: argparse.Namespace, layout: Line) -> int:
    if args.abort:
        abort_carry(layout, args.version)
    else:
        named = bool(os.environ.get("PSTACK_LINE"))
        carry(
            layout if named else recorded_source(layout.newest, args.version),
            args.version)
    return 0


def recorded_source(layout: Line, version: str | None) -> Line:
    """The line to carry onto `version` when LINE= names none: the line the
    line on `version` records (carried_from) it was carried from, so that
    from a fresh clone `make rebase TO=<version>` makes the committed line
    whichever line it came from; else `layout` (the newest line, runtime
    or not)."""
    if version is None:
        return layout
    line = layout.line(version)
    if not line.base_file.exists():
        return layout
    carried_from = read_record(line).carried_from
    if not carried_from or carried_from == layout.version:
        return layout
    source = layout.existing_line(carried_from)
    progress(f"{line.folder}/ was carried from {source.folder}/ "
             f"({CARRIED_TOML}): carrying that line")
    return source


# ---------------------------------------------------------------- carrying


def _work(layout: Line, version: str) -> Line:
    """The copy of the carried line that is rebased, in the new line's
    vllm-src."""
    assert layout.root is not None
    scratch = layout.root / "build" / f"carry-{version}"
    return Line(patches=scratch / LINES / layout.version,
                src=layout.line(version).src,
                cache=layout.cache,
                root=scratch)


def _prepare(layout: Line, line: Line, work: Line) -> None:
    """The carried line, applied in the new line's vllm-src."""
    src = VllmSrc(line.src)
    if src.exists() and line.base_file.exists():
        # Nothing of the line's own is lost: vllm-src-<version> holds
        # nothing that lines/<version>/ does not.
        ensure_safe_to_reset(line, line.pin)
    elif src.exists():
        src.refuse_operation_in_progress()
        if src.uncommitted_changes():
            raise UserError(f"{src.path} has uncommitted changes",
                            "commit or stash them, or move it away")
    if work.root.exists():
        shutil.rmtree(work.root)
    shutil.copytree(layout.patches, work.patches)
    if layout.upstream_record.exists():
        shutil.copyfile(layout.upstream_record, work.upstream_record)
    progress(f"carrying {layout.folder}/ in {work.root}, rebased in "
             f"{line.src}")
    # Checked above against the line itself: what vllm-src-<version> has
    # beyond the copy is the line's, already in lines/<version>/.
    apply(work, force=True)


def _carry_version(layout: Line, version: str | None,
                   if_none_under_way: UserError) -> str:
    """`version` if given, else the version of the only carry under way
    (build/carry-<version>/ exists while it is); `if_none_under_way` is
    raised when there is none."""
    if version is not None:
        return version
    under_way = [
        path.name.removeprefix("carry-")
        for path in sorted((layout.root / "build").glob("carry-*"))
    ]
    if not under_way:
        raise if_none_under_way
    if len(under_way) > 1:
        raise UserError(f"carries onto {', '.join(under_way)} are under way",
                        "name one: TO=<version>")
    return under_way[0]


def carry(layout: Line, version: str | None) -> Result:
    """Carry `layout`'s line onto `version` (None: continue the carry under
    way): start, or continue after a stop, and write the new line."""
    version = _carry_version(layout, version, no_version_given())
    refuse_same_version(layout, version)
    line = layout.line(version)
    work = _work(layout, version)
    src = VllmSrc(line.src)
    under_way = src.exists() and RebaseState.load(src) is not None
    # The record is read again when a carry continues: the line's folder
    # is written only at the end.
    replay = replay_plan(layout, line)
    if not under_way:
        _prepare(layout, line, work)
    elif not work.patches.exists():
        raise UserError(
            f"a carry onto vLLM {version} is under way in {line.src} but its "
            f"copy {work.root} is gone", "`make rebase-abort` and start again")
    # docs/reports/<version>/rebase.* belong to `make rebase-report`.
    result = rebase(work,
                    version,
                    replay,
                    range_diff=layout.reports(version) / "carry.range-diff",
                    line_arg=_line_arg(layout))
    _install(layout, line, work, result, replay)
    replayed = len(replay.replay) + len(replay.insert)
    print(f"line {line.folder}/: {len(result.kept)} patches on vLLM "
          f"{version}, {replayed} replayed from its record; "
          f"{line.src.name}/ has them applied")
    print(f"review: {result.range_diff}")
    print(f"next: `make check-series LINE={version}`, then commit "
          f"{line.folder}/ and docs/")
    return result


def _line_arg(layout: Line) -> str:
    """The LINE= a make command needs to name the line carried."""
    return f" LINE={layout.version}"


def _install(layout: Line, line: Line, work: Line, result: Result,
             replay: ReplayPlan) -> None:
    """Write the rebased copy as the new line, with its record."""
    line.patches.mkdir(parents=True, exist_ok=True)
    for old in line.patches.glob("*.patch"):
        old.unlink()
    for path in work.patches.iterdir():
        shutil.copyfile(path, line.patches / path.name)
    written_here = {recorded.name for _, recorded in replay.insert}
    # The rebase keeps the order: the patches it kept are, in order, the
    # new line's, even those whose subject a resolution changed.
    gone = {*result.dropped, *result.absorbed}
    left_out = {*result.skipped, *result.left_out}
    sources = []
    out = []
    for name, patch in read_patches(layout):
        if patch.subject in left_out:
            out.append(left_out_of(layout, name))
        elif patch.subject not in gone:
            sources.append(name)
    patches = [p for p in read_series(line) if p not in written_here]
    if len(sources) != len(patches):
        raise UserError(
            f"{line.folder}/ is written, but its {CARRIED_TOML} is "
            "not: patches were both skipped and renamed during the rebase, "
            "so which patch comes from which is not known",
            f"write {line.folder}/{CARRIED_TOML} by hand (see "
            "docs/workflow.md)")
    source_of = dict(zip(patches, sources))
    write_record(
        line, layout,
        Record(
            tuple(
                carried_from(layout, source_of[name], into=name) if name in
                source_of else CarriedPatch(name)
                for name in read_series(line)), tuple(out)))
    shutil.rmtree(work.root)


def abort_carry(layout: Line, version: str | None) -> None:
    """`make rebase-abort`: stop the carry under way (TO=<version>, or the
    only one)."""
    version = _carry_version(
        layout, version,
        UserError("no `make rebase` is under way",
                  "make rebase TO=<version>, e.g. TO=0.10.2"))
    work = _work(layout, version)
    abort(work)
    shutil.rmtree(work.root, ignore_errors=True)
    print(f"{work.src.name}/ holds the line carried, "
          f"{layout.folder}/; `make apply LINE={version}` puts the "
          f"line on {version} back there, if there is one")
