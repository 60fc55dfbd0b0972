"""Nothing that is not already in patches/ is ever discarded: commands that
reset vllm-src first make sure it holds no uncommitted work, no unfinished
git command and no commit that `make export` has not written."""

from __future__ import annotations

import filecmp
import tempfile
import time
from pathlib import Path

from ..core.errors import UserError, progress
from ..core.line import Line
from ..core.pin import BasePin
from ..core.series import format_patches, read_series
from ..core.vllm_src import SERIES, VllmSrc


def unexported_commits(layout: Line, pin: BasePin) -> list[str]:
    """Subjects of the `series` commits if exporting them would change
    patches/ (empty when it would not)."""
    src = VllmSrc(layout.src)
    tip = src.rev(SERIES)
    if tip is None:
        return []
    synced = src.synced_tip_file
    if synced.exists() and synced.read_text().strip() == tip:
        return []  # series is exactly what the last apply or export left
    base = src.base_of_series(pin)
    with tempfile.TemporaryDirectory() as tmp:
        names = format_patches(src, base, SERIES, Path(tmp))
        current = read_series(layout) if layout.series_file.exists() else []
        same = names == current and all(
            filecmp.cmp(Path(tmp) / n, layout.patches / n, shallow=False)
            for n in names)
    return [] if same else src.subjects(f"{base}..{SERIES}")


def refuse_unexported(layout: Line, pin: BasePin, hint: str) -> None:
    unexported = unexported_commits(layout, pin)
    if unexported:
        raise UserError(
            f"{layout.src.name} has commits not exported to "
            f"{layout.folder}/: " + "; ".join(unexported[-3:]), hint)


def ensure_safe_to_reset(layout: Line,
                         pin: BasePin,
                         force: bool = False) -> None:
    """Refuse to reset vllm-src over work that would be lost; with `force`,
    unexported commits are kept on a backup branch instead."""
    src = VllmSrc(layout.src)
    src.refuse_operation_in_progress()
    dirty = src.uncommitted_changes()
    if dirty:
        shown = ", ".join(dirty[:5]) + (" ..." if len(dirty) > 5 else "")
        raise UserError(
            f"{src.path} has uncommitted changes ({shown}); "
            "refusing to overwrite",
            "commit them onto the series and `make export`, or stash them")
    if src.rev(pin.tag) is None or src.rev(SERIES) is None:
        return
    unexported = unexported_commits(layout, pin)
    if unexported and not force:
        raise UserError(
            f"{src.path} branch `{SERIES}` has commits not exported to "
            f"{layout.folder}/: " + "; ".join(unexported[-3:]),
            "keep them with `make export`, or discard them with "
            "`make apply FORCE=1` (a backup branch is kept)")
    if unexported:
        backup = f"backup/{SERIES}-{time.strftime('%Y%m%d-%H%M%S')}"
        src.git("branch", "-f", backup, SERIES)
        progress(f"kept the discarded commits on branch {backup}")
