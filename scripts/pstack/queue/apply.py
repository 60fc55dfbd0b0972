"""`make apply`: (re)create vllm-src-<version> = the pinned base + the
line's series (lines/<version>/series).

The base release (and the releases it was rebased from) are imported on
branch `upstream`; branch `series` is reset to the base tag and the patches
are applied with `git am --3way`. A patch that does not apply stops `git
am` there, for a person to resolve.

Refuses while vllm-src has uncommitted changes, an unfinished git command,
or commits on `series` that `make export` has not written to patches/
(`--force` discards those, keeping them on a backup branch).
"""

from __future__ import annotations

import argparse
import re

from ..core.download import fetch_sdist
from ..core.errors import UserError, progress
from ..core.gitrepo import STACK_COMMITTER
from ..core.line import Line
from ..core.series import read_series
from ..core.vllm_src import SERIES, VllmSrc
from .guard import ensure_safe_to_reset
from .importer import import_base, init_repo

BASE_COMMIT = "base-commit: "

# Subjects kept as they are ([Tag]s too); the stack's committer and the
# author's date: the same commit ids on every machine.
GIT_AM = ("am", "--3way", "--keep", "--keep-cr",
          "--committer-date-is-author-date", "--quiet")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--force",
        action="store_true",
        help="discard unexported commits (kept on a backup branch)")


def run(args: argparse.Namespace, layout: Line) -> int:
    apply(layout, force=args.force)
    return 0


def apply(layout: Line, *, force: bool = False) -> str:
    """Reset `series` to the base plus the patches; return its tip."""
    pin = layout.pin
    names = read_series(layout)
    fetch_sdist(pin, layout.cache)
    src = VllmSrc(layout.src)
    init_repo(src)
    if src.rev(SERIES) is not None:
        ensure_safe_to_reset(layout, pin, force=force)
    import_base(src, pin, layout.cache, base_commit(layout, names))
    src.git("checkout", "-q", "-f", "-B", SERIES, pin.tag)
    src.synced_tip_file.unlink(missing_ok=True)
    if names:
        progress(f"applying {len(names)} patches onto {pin.tag}")
        _am(layout, src, names)
    tip = src.rev(SERIES)
    src.synced_tip_file.write_text(tip + "\n")
    progress(f"{layout.src.name}: branch {SERIES} = {pin.tag} + {len(names)} "
             f"patches ({tip[:12]})")
    return tip


def _am(layout: Line, src: VllmSrc, names: list[str]) -> None:
    files = [str((layout.patches / n).resolve()) for n in names]
    proc = src.run(*GIT_AM, *files, env=STACK_COMMITTER.committer())
    if proc.returncode == 0:
        return
    next_file = src.git_dir / "rebase-apply" / "next"
    index = int(next_file.read_text()) - 1 if next_file.exists() else 0
    failed = names[index] if 0 <= index < len(names) else "?"
    conflicts = src.git("diff", "--name-only", "--diff-filter=U",
                        check=False).split()
    if not conflicts:
        conflicts = sorted(
            set(re.findall(r"patch failed: ([^:\n]+):", proc.stderr)))
    files_msg = (", ".join(conflicts)
                 if conflicts else "see `git am --show-current-patch=diff`")
    raise UserError(
        f"patch {index + 1}/{len(names)} {failed} does not apply; "
        f"conflicting files: {files_msg}",
        f"resolve in {src.path}, `git add` the files, `git -C {src.path} am "
        "--continue`, then `make export`; or give up with "
        f"`git -C {src.path} am --abort`")


def base_commit(layout: Line, names: list[str]) -> str | None:
    """The commit the series was exported on: the base-commit trailer
    `make export` writes at the end of the first patch."""
    if not names:
        return None
    lines = (layout.patches / names[0]).read_text().splitlines()
    for line in reversed(lines[-5:]):
        if line.startswith(BASE_COMMIT):
            return line.removeprefix(BASE_COMMIT).strip()
    return None
