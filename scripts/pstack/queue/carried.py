"""lines/<version>/carried.toml: where each patch of a line comes from.

`make rebase TO=<version>` writes it beside the line it carries: for each
patch of the new line, the patch of the line carried that it comes from and
that file's sha256. While a source's sha256 matches, carrying again replays
the line's version of the patch (a resolution made once) instead of
carrying the source again:

    [[carried]]
    patch = "Core-B.patch"          # its file in lines/<version>/
    source = "Core-B.patch"         # its file in the line carried
    source_sha256 = "9f86d08..."    # of that file, when it was carried

Two more decisions are made once and replayed:

    [[carried]]
    patch = "Bugfix-CPU-X.patch"    # no source: written in this line
                                    # (added with `make export LINE=...`)

    [[left_out]]
    source = "Core-D.patch"         # skipped during the carry, or taken out
    source_sha256 = "5e88489..."    # of the line since: not carried again

The `[[carried]]` entries are in the line's order; carrying again puts a
patch written in the line right after the patch before it. `carried_from`
is the vLLM release of the line carried: `make rebase TO=<version>` without
LINE= carries that line again.
"""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..core.download import sha256_of
from ..core.errors import UserError
from ..core.line import Line
from ..core.series import read_patches

CARRIED_TOML = "carried.toml"


@dataclass(frozen=True)
class CarriedPatch:
    """A patch of a line and the patch of the line below it that it was
    carried from ("" for a patch written in the line)."""

    patch: str  # its file in the line
    source: str = ""  # the file it comes from, in the line carried
    source_sha256: str = ""

    @property
    def written_here(self) -> bool:
        return not self.source


@dataclass(frozen=True)
class LeftOut:
    """A patch of the line carried that the line does not carry."""

    source: str
    source_sha256: str


@dataclass(frozen=True)
class Record:
    """A line's carried.toml."""

    carried: tuple[CarriedPatch, ...] = ()
    left_out: tuple[LeftOut, ...] = ()
    # The vLLM release of the line carried ("": not recorded, the default
    # line).
    carried_from: str = ""


@dataclass(frozen=True)
class ReplayPlan:
    """What carrying a line again takes from its record (source names are
    the files of the line carried)."""

    # Source -> the line's version of it, replayed instead of the source.
    replay: dict[str, Path] = field(default_factory=dict)
    # Sources the line leaves out.
    leave_out: frozenset[str] = frozenset()
    # Patches written in the line: (the source of the carried patch before
    # it, None at the start of the line; the file), in the line's order.
    insert: tuple[tuple[str | None, Path], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.replay or self.leave_out or self.insert)


def read_record(line: Line) -> Record:
    """The line's carried.toml (empty if there is none)."""
    path = line.patches / CARRIED_TOML
    if not path.exists():
        return Record()
    try:
        data = tomllib.loads(path.read_text())
        return Record(
            tuple(CarriedPatch(**e) for e in data.get("carried", [])),
            tuple(LeftOut(**e) for e in data.get("left_out", [])),
            str(data.get("carried_from", "")))
    except (tomllib.TOMLDecodeError, TypeError) as e:
        raise UserError(
            f"{path} is not a valid record: {e}",
            "restore it from git, or delete it to carry every "
            "patch again") from e


def read_carried(line: Line) -> list[CarriedPatch]:
    """The `[[carried]]` entries of the line's carried.toml."""
    return list(read_record(line).carried)


def render_carried(to_version: str, source_dir: str, source_version: str,
                   record: Record) -> str:
    """The text of carried.toml for a line on vLLM `to_version` carried from
    `source_dir`/ (on vLLM `source_version`).

    >>> print(render_carried("0.0.2", "lines/0.0.1", "0.0.1", Record(
    ...     (CarriedPatch("B.patch", "B.patch", "ab12"),
    ...      CarriedPatch("New.patch")), (LeftOut("C.patch", "cd34"),))))
    # Written by `make rebase TO=0.0.2` from lines/0.0.1/ (vLLM 0.0.1).
    # Each patch of this line and the patch it was carried from, with
    # that file's sha256: while the source is unchanged, carrying again
    # replays this line's version of the patch (resolutions included).
    # A patch with no source was written in this line; a patch left out
    # is not carried again while its source is unchanged.
    carried_from = "0.0.1"
    <BLANKLINE>
    [[carried]]
    patch = "B.patch"
    source = "B.patch"
    source_sha256 = "ab12"
    <BLANKLINE>
    [[carried]]
    patch = "New.patch"
    <BLANKLINE>
    [[left_out]]
    source = "C.patch"
    source_sha256 = "cd34"
    <BLANKLINE>
    """
    header = [
        f"# Written by `make rebase TO={to_version}` from {source_dir}/ "
        f"(vLLM {source_version}).",
        "# Each patch of this line and the patch it was carried from, with",
        "# that file's sha256: while the source is unchanged, carrying again",
        "# replays this line's version of the patch (resolutions included).",
        "# A patch with no source was written in this line; a patch left out",
        "# is not carried again while its source is unchanged.",
        f'carried_from = "{source_version}"',
    ]
    return "\n".join(header) + "\n\n" + _render_entries(record)


def _render_entries(record: Record) -> str:
    text = []
    for entry in record.carried:
        text += ["[[carried]]", f'patch = "{entry.patch}"']
        if not entry.written_here:
            text += [
                f'source = "{entry.source}"',
                f'source_sha256 = "{entry.source_sha256}"'
            ]
        text.append("")
    # By name: the same text whether the carry or `make export` wrote it.
    for out in sorted(record.left_out, key=lambda out: out.source):
        text += [
            "[[left_out]]", f'source = "{out.source}"',
            f'source_sha256 = "{out.source_sha256}"', ""
        ]
    return "\n".join(text)


def write_record(line: Line, source: Line, record: Record) -> None:
    """Write `line`'s carried.toml: its patches, carried from `source`."""
    (line.patches / CARRIED_TOML).write_text(
        render_carried(line.pin.version, source.folder, source.pin.version,
                       record))


def follow_export(line: Line, before: list[str], after: list[str]) -> None:
    """Keep the line's record in step with `make export` (the line's patch
    names `before` and `after` it): a patch renamed keeps its source, a new
    patch is written in the line, and a carried patch taken out of the line
    is left out when the line is carried again. No record: nothing to do.

    Renames are told from removals and additions by position: a run of
    patches replaced by as many others is renamed.
    """
    path = line.patches / CARRIED_TOML
    if not path.exists() or before == after:
        return
    record = read_record(line)
    by_name = {entry.patch: entry for entry in record.carried}
    carried: list[CarriedPatch] = []
    left_out = list(record.left_out)
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        old = [by_name.get(name, CarriedPatch(name)) for name in before[i1:i2]]
        if op == "equal" or (op == "replace" and i2 - i1 == j2 - j1):
            carried += [
                replace(entry, patch=name)
                for entry, name in zip(old, after[j1:j2])
            ]
            continue
        left_out += [
            LeftOut(e.source, e.source_sha256) for e in old
            if not e.written_here
        ]
        carried += [CarriedPatch(name) for name in after[j1:j2]]
    header = path.read_text().split("\n\n", 1)[0]
    path.write_text(header + "\n\n" +
                    _render_entries(Record(tuple(carried), tuple(left_out))))


def carried_from(source: Line, patch: str, into: str) -> CarriedPatch:
    """The entry of `into` (a patch of the new line) carried from `patch`
    of `source`, with that file's sha256 now."""
    return CarriedPatch(into, patch, sha256_of(source.patches / patch))


def left_out_of(source: Line, patch: str) -> LeftOut:
    """The entry of `patch` of `source`, left out of the new line."""
    return LeftOut(patch, sha256_of(source.patches / patch))


def replay_plan(source: Line, line: Line) -> ReplayPlan:
    """What the line's record replays when `source` is carried onto the
    line's release again.

    Raises:
        UserError: naming the recorded patches whose source changed since,
            or whose recorded version is missing.
    """
    sources = {name for name, _ in read_patches(source)}
    record = read_record(line)
    replay: dict[str, Path] = {}
    insert: list[tuple[str | None, Path]] = []
    stale: list[str] = []
    before: str | None = None  # the last carried source, in line order
    for entry in record.carried:
        recorded = line.patches / entry.patch
        if (entry.written_here
                or entry.source in sources) and not recorded.exists():
            raise UserError(
                f"{line.folder}/{CARRIED_TOML} records "
                f"{entry.patch}, which is not in the line",
                "restore it from git, or delete its entry")
        if entry.written_here:
            insert.append((before, recorded))
            continue
        if entry.source not in sources:
            continue  # gone from the line carried: nothing to replay
        before = entry.source
        if sha256_of(source.patches / entry.source) != entry.source_sha256:
            stale.append(entry.source)
        else:
            replay[entry.source] = recorded
    leave_out = set()
    for out in record.left_out:
        if out.source not in sources:
            continue
        if sha256_of(source.patches / out.source) != out.source_sha256:
            stale.append(out.source)
        else:
            leave_out.add(out.source)
    if stale:
        raise _stale_error(source, line, stale)
    return ReplayPlan(replay, frozenset(leave_out), tuple(insert))


def recorded_versions(source: Line, line: Line) -> dict[str, Path]:
    """Source patch name -> the line's recorded version of it, for the
    patches of `source` the line has a current record of (see
    replay_plan)."""
    return replay_plan(source, line).replay


def _stale_error(source: Line, line: Line, stale: list[str]) -> UserError:
    record = f"{line.folder}/{CARRIED_TOML}"
    return UserError(
        f"{len(stale)} patch(es) of {source.folder}/ changed since "
        f"{line.folder}/ recorded how they are carried: " + ", ".join(stale),
        f"carry the change into the line by hand (`make apply LINE=...`, "
        f"edit vllm-src-..., `make export LINE=...`) and update its "
        f"sha256 in {record}, or delete the entry: "
        "`make rebase` then carries the patch again and stops if it "
        "conflicts")
