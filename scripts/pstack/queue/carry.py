"""`make rebase TO=<version>`: carry a line of the stack onto a newer vLLM
release, as a line of its own.

The line carried (the default one, or the one LINE=<version> names) stays as
it is. The new line is written next to it (see Layout.line):
patches-<version>/ with its pin, series and patches, and
vllm-src-<version>/ with them applied. The work happens on a copy of the
carried line's patches in build/carry-<version>/, rebased in place in
vllm-src-<version>/ by rebase.py: a conflict stops there, and `make rebase
TO=<version>` continues once a person has resolved it.

Resolutions are made once. The new line's carried.toml records, for each of
its patches, the patch of the carried line it comes from and that file's
sha256. Carrying again (from a fresh clone, say) replaces every patch whose
source is unchanged by its recorded version, so that the new line comes out
byte for byte as committed and no one is asked anything. A recorded patch
whose source changed since is refused before anything is touched: carried
mechanically, it would silently lose what was resolved by hand.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import UserError, progress
from ..core.layout import Layout
from ..core.pin import BasePin
from ..core.series import read_patches, read_series
from ..core.vllm_src import VllmSrc
from .apply import apply
from .guard import ensure_safe_to_reset
from .rebase import RebaseState, Result, abort, rebase

RECORD = "carried.toml"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("version",
                        nargs="?",
                        help="the vLLM release to carry the line onto")
    parser.add_argument("--abort",
                        action="store_true",
                        help="undo a carry under way")


def run(args: argparse.Namespace, layout: Layout) -> int:
    if args.abort:
        abort_carry(layout, args.version)
    else:
        carry(layout, args.version)
    return 0


# ---------------------------------------------------------------- record


@dataclass(frozen=True)
class CarriedPatch:
    """A patch of a line and the patch of the line below it that it was
    carried from."""

    patch: str  # its file in the line
    source: str  # the file it comes from, in the line carried
    source_sha256: str


def read_record(line: Layout) -> list[CarriedPatch]:
    path = line.patches / RECORD
    if not path.exists():
        return []
    try:
        data = tomllib.loads(path.read_text())
        return [CarriedPatch(**entry) for entry in data.get("carried", [])]
    except (tomllib.TOMLDecodeError, TypeError) as e:
        raise UserError(
            f"{path} is not a valid record: {e}",
            "restore it from git, or delete it to carry every "
            "patch again") from e


def write_record(line: Layout, source: Layout,
                 entries: list[CarriedPatch]) -> None:
    lines = [
        f"# Written by `make rebase TO={BasePin.load(line.base_file).version}"
        f"` from {source.patches.name}/ (vLLM "
        f"{BasePin.load(source.base_file).version}).",
        "# Each patch of this line and the patch it was carried from, with",
        "# that file's sha256: while the source is unchanged, carrying again",
        "# replays this line's version of the patch (resolutions included).",
        ""
    ]
    for entry in entries:
        lines += [
            "[[carried]]", f'patch = "{entry.patch}"',
            f'source = "{entry.source}"',
            f'source_sha256 = "{entry.source_sha256}"', ""
        ]
    (line.patches / RECORD).write_text("\n".join(lines))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def recorded_versions(source: Layout, line: Layout) -> dict[str, Path]:
    """Source patch name -> the line's recorded version of it, for the
    patches of `source` the line has a current record of.

    Raises:
        UserError: naming the recorded patches whose source changed since,
            or whose recorded version is missing.
    """
    sources = {name for name, _ in read_patches(source)}
    replay: dict[str, Path] = {}
    stale: list[str] = []
    for entry in read_record(line):
        if entry.source not in sources:
            continue  # gone from the line carried: nothing to replay
        recorded = line.patches / entry.patch
        if not recorded.exists():
            raise UserError(
                f"{line.patches.name}/{RECORD} records {entry.patch}, which "
                "is not in the line", "restore it from git, or delete its "
                "entry to carry the patch again")
        if _sha256(source.patches / entry.source) != entry.source_sha256:
            stale.append(entry.source)
        else:
            replay[entry.source] = recorded
    if stale:
        raise UserError(
            f"{len(stale)} patch(es) of {source.patches.name}/ changed since "
            f"{line.patches.name}/ recorded how they are carried: " +
            ", ".join(stale),
            f"carry the change into the line by hand (`make apply LINE=...`, "
            f"edit vllm-src-..., `make export LINE=...`) and update its "
            f"sha256 in {line.patches.name}/{RECORD}, or delete the entry: "
            "`make rebase` then carries the patch again and stops if it "
            "conflicts")
    return replay


# ---------------------------------------------------------------- carrying


def _work(layout: Layout, version: str) -> Layout:
    """The copy of the carried line that is rebased, in the new line's
    vllm-src."""
    assert layout.root is not None
    scratch = layout.build / f"carry-{version}"
    return Layout(patches=scratch / "patches",
                  src=layout.line(version).src,
                  cache=layout.cache,
                  root=scratch)


def _prepare(layout: Layout, line: Layout, work: Layout) -> None:
    """The carried line, applied in the new line's vllm-src."""
    src = VllmSrc(line.src)
    if src.exists() and line.base_file.exists():
        # Nothing of the line's own is lost: vllm-src-<version> holds
        # nothing that patches-<version> does not.
        ensure_safe_to_reset(line, BasePin.load(line.base_file))
    elif src.exists():
        src.refuse_operation_in_progress()
        if src.uncommitted_changes():
            raise UserError(f"{src.path} has uncommitted changes",
                            "commit or stash them, or move it away")
    if work.root.exists():
        shutil.rmtree(work.root)
    shutil.copytree(layout.patches, work.patches)
    progress(f"carrying {layout.patches.name}/ in {work.root}, rebased in "
             f"{line.src}")
    # Checked above against the line itself: what vllm-src-<version> has
    # beyond the copy is the line's, already in patches-<version>.
    apply(work, force=True)


def _under_way(layout: Layout, version: str | None, doing: str) -> str:
    """The version of the carry under way that `version` (None: the only
    one) names."""
    if version is not None:
        return version
    under_way = [
        path.name.removeprefix("carry-")
        for path in sorted(layout.build.glob("carry-*"))
    ]
    if not under_way:
        raise UserError("no `make rebase` is under way" + doing,
                        "make rebase TO=<version>, e.g. TO=0.10.2")
    if len(under_way) > 1:
        raise UserError(f"carries onto {', '.join(under_way)} are under way",
                        "name one: TO=<version>")
    return under_way[0]


def carry(layout: Layout, version: str | None) -> Result:
    """Carry `layout`'s line onto `version` (None: continue the carry under
    way): start, or continue after a stop, and write the new line."""
    version = _under_way(layout, version, " and no version given")
    pin = BasePin.load(layout.base_file)
    if version == pin.version:
        raise UserError(
            f"the line in {layout.patches.name}/ is based on "
            f"vLLM {version} already",
            "nothing to carry; pick a newer release")
    line = layout.line(version)
    work = _work(layout, version)
    src = VllmSrc(line.src)
    under_way = src.exists() and RebaseState.load(src) is not None
    replay = None
    if not under_way:
        replay = recorded_versions(layout, line)
        _prepare(layout, line, work)
    elif not work.patches.exists():
        raise UserError(
            f"a carry onto vLLM {version} is under way in {line.src} but its "
            f"copy {work.root} is gone", "`make rebase-abort` and start again")
    # docs/rebase-<version>.* belong to `make rebase-report`.
    result = rebase(work, version, replay, docs=layout.docs / "lines")
    _install(layout, line, work, result)
    print(f"line {line.patches.name}/: {len(result.kept)} patches on vLLM "
          f"{version}, {len(replay or ())} replayed from its record; "
          f"{line.src.name}/ has them applied")
    print(f"review: {result.range_diff}")
    print(f"next: `make check-series LINE={version}`, then commit "
          f"{line.patches.name}/ and docs/")
    return result


def _install(layout: Layout, line: Layout, work: Layout,
             result: Result) -> None:
    """Write the rebased copy as the new line, with its record."""
    line.patches.mkdir(parents=True, exist_ok=True)
    for old in line.patches.glob("*.patch"):
        old.unlink()
    for path in work.patches.iterdir():
        shutil.copyfile(path, line.patches / path.name)
    # The rebase keeps the order: the patches it kept are, in order, the
    # new line's, even those whose subject a resolution changed.
    gone = {*result.dropped, *result.absorbed, *result.skipped}
    sources = [
        name for name, patch in read_patches(layout)
        if patch.subject not in gone
    ]
    patches = read_series(line)
    if len(sources) != len(patches):
        raise UserError(
            f"{line.patches.name}/ is written, but its {RECORD} is not: "
            "patches were both skipped and renamed during the rebase, so "
            "which patch comes from which is not known",
            f"write {line.patches.name}/{RECORD} by hand (see "
            "docs/workflow.md)")
    write_record(line, layout, [
        CarriedPatch(patch, source, _sha256(layout.patches / source))
        for patch, source in zip(patches, sources)
    ])
    shutil.rmtree(work.root)


def abort_carry(layout: Layout, version: str | None) -> None:
    """`make rebase-abort`: stop the carry under way (TO=<version>, or the
    only one)."""
    version = _under_way(layout, version, "")
    work = _work(layout, version)
    abort(work)
    shutil.rmtree(work.root, ignore_errors=True)
    print(f"{work.src.name}/ holds the line carried, "
          f"{layout.patches.name}/; `make apply LINE={version}` puts the "
          f"line on {version} back there, if there is one")
