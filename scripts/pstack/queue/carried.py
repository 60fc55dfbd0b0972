"""patches-<version>/carried.toml: where each patch of a line comes from.

`make rebase TO=<version>` writes it beside the line it carries: for each
patch of the new line, the patch of the line carried that it comes from and
that file's sha256. While a source's sha256 matches, carrying again replays
the line's version of the patch (a resolution made once) instead of
carrying the source again:

    [[carried]]
    patch = "Core-B.patch"          # its file in patches-<version>/
    source = "Core-B.patch"         # its file in the line carried
    source_sha256 = "9f86d08..."    # of that file, when it was carried
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..core.download import sha256_of
from ..core.errors import UserError
from ..core.layout import Layout
from ..core.pin import BasePin
from ..core.series import read_patches

CARRIED_TOML = "carried.toml"


@dataclass(frozen=True)
class CarriedPatch:
    """A patch of a line and the patch of the line below it that it was
    carried from."""

    patch: str  # its file in the line
    source: str  # the file it comes from, in the line carried
    source_sha256: str


def read_carried(line: Layout) -> list[CarriedPatch]:
    """The entries of the line's carried.toml (none if there is no file)."""
    path = line.patches / CARRIED_TOML
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


def render_carried(to_version: str, source_dir: str, source_version: str,
                   entries: list[CarriedPatch]) -> str:
    """The text of carried.toml for a line on vLLM `to_version` carried from
    `source_dir`/ (on vLLM `source_version`).

    >>> print(render_carried("0.0.2", "patches", "0.0.1",
    ...                      [CarriedPatch("B.patch", "B.patch", "ab12")]))
    # Written by `make rebase TO=0.0.2` from patches/ (vLLM 0.0.1).
    # Each patch of this line and the patch it was carried from, with
    # that file's sha256: while the source is unchanged, carrying again
    # replays this line's version of the patch (resolutions included).
    <BLANKLINE>
    [[carried]]
    patch = "B.patch"
    source = "B.patch"
    source_sha256 = "ab12"
    <BLANKLINE>
    """
    text = [
        f"# Written by `make rebase TO={to_version}` from {source_dir}/ "
        f"(vLLM {source_version}).",
        "# Each patch of this line and the patch it was carried from, with",
        "# that file's sha256: while the source is unchanged, carrying again",
        "# replays this line's version of the patch (resolutions included).",
        ""
    ]
    for entry in entries:
        text += [
            "[[carried]]", f'patch = "{entry.patch}"',
            f'source = "{entry.source}"',
            f'source_sha256 = "{entry.source_sha256}"', ""
        ]
    return "\n".join(text)


def write_carried(line: Layout, source: Layout,
                  entries: list[CarriedPatch]) -> None:
    """Write `line`'s carried.toml: its patches, carried from `source`."""
    (line.patches / CARRIED_TOML).write_text(
        render_carried(
            BasePin.load(line.base_file).version, source.patches.name,
            BasePin.load(source.base_file).version, entries))


def carried_from(source: Layout, patch: str, into: str) -> CarriedPatch:
    """The entry of `into` (a patch of the new line) carried from `patch`
    of `source`, with that file's sha256 now."""
    return CarriedPatch(into, patch, sha256_of(source.patches / patch))


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
    for entry in read_carried(line):
        if entry.source not in sources:
            continue  # gone from the line carried: nothing to replay
        recorded = line.patches / entry.patch
        if not recorded.exists():
            raise UserError(
                f"{line.patches.name}/{CARRIED_TOML} records {entry.patch}, "
                "which is not in the line", "restore it from git, or delete "
                "its entry to carry the patch again")
        if sha256_of(source.patches / entry.source) != entry.source_sha256:
            stale.append(entry.source)
        else:
            replay[entry.source] = recorded
    if stale:
        raise _stale_error(source, line, stale)
    return replay


def _stale_error(source: Layout, line: Layout, stale: list[str]) -> UserError:
    record = f"{line.patches.name}/{CARRIED_TOML}"
    return UserError(
        f"{len(stale)} patch(es) of {source.patches.name}/ changed since "
        f"{line.patches.name}/ recorded how they are carried: " +
        ", ".join(stale),
        f"carry the change into the line by hand (`make apply LINE=...`, "
        f"edit vllm-src-..., `make export LINE=...`) and update its "
        f"sha256 in {record}, or delete the entry: "
        "`make rebase` then carries the patch again and stops if it "
        "conflicts")
