"""`make export`: write the commits of vllm-src's `series` to patches/.

One patch file per commit, named by its subject, and the line's series in the
commits' order; files of patches no longer in the series are removed. The
output is byte-stable: exporting what `make apply` made changes nothing.
Also regenerates the series table in the line's README.md (series_table.py),
and, on a line made by `make rebase`, keeps its carried.toml in step
(carried.follow_export: patches renamed, written in the line, taken out).
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import tempfile
from pathlib import Path

from ..core.errors import UserError, progress
from ..core.line import Line
from ..core.series import format_patches, read_series, write_series
from ..core.vllm_src import SERIES, VllmSrc
from .carried import follow_export
from .series_table import update_series_table


def configure(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace, layout: Line) -> int:
    export(layout)
    return 0


def export(layout: Line) -> list[str]:
    """Write the series to patches/; return the patch names in order."""
    pin = layout.pin
    src = VllmSrc(layout.src)
    if not src.exists():
        raise UserError(f"{src.path} does not exist", "run `make apply` first")
    src.refuse_operation_in_progress()
    if src.rev(SERIES) is None:
        raise UserError(f"{src.path} has no branch `{SERIES}`",
                        "run `make apply` first")
    dirty = src.uncommitted_changes()
    if dirty:
        print(f"warning: {len(dirty)} uncommitted change(s) in {src.path} "
              "are not exported (commit them onto the series first)")
    base = src.base_of_series(pin)
    layout.patches.mkdir(parents=True, exist_ok=True)
    # The names before, for the line's record.
    before = read_series(layout) if layout.series_file.exists() else []
    with tempfile.TemporaryDirectory() as tmp:
        names = format_patches(src, base, SERIES, Path(tmp))
        changed = 0
        for name in names:
            new, dest = Path(tmp) / name, layout.patches / name
            if not dest.exists() or not filecmp.cmp(new, dest, shallow=False):
                shutil.copyfile(new, dest)
                changed += 1
    removed = [
        p for p in layout.patches.glob("*.patch") if p.name not in names
    ]
    for p in removed:
        p.unlink()
    write_series(layout, names)
    follow_export(layout, before, names)
    src.synced_tip_file.write_text(src.rev(SERIES) + "\n")
    progress(f"exported {len(names)} patches to {layout.patches} "
             f"({changed} written, {len(removed)} removed)")
    update_series_table(layout)
    return names
