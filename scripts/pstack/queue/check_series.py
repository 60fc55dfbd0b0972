"""`make check-series`: the series applies, re-exports byte for byte, and
every patch is upstream-shaped (tagged subject, a body saying why, DCO
sign-off by its author, and an Upstream-Status trailer)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..core.errors import UserError
from ..core.gitrepo import GitRepo
from ..core.line import Line
from ..core.patch import Patch
from ..core.series import read_series
from .apply import apply
from .export import export


def configure(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace, layout: Line) -> int:
    check_series(layout)
    return 0


def lint_patch(path: Path) -> list[str]:
    """Problems with one patch file, empty when it is upstream-shaped."""
    return Patch.from_file(path).problems()


def lint_series(layout: Line) -> None:
    failures = [
        f"{name}: {problem}" for name in read_series(layout)
        for problem in lint_patch(layout.patches / name)
    ]
    if failures:
        raise UserError(
            "; ".join(failures), "reword the commit in vllm-src "
            "(`git -C vllm-src rebase -i v<base>`, `reword`), then "
            "`make export`")


def _snapshot(layout: Line) -> dict[str, bytes]:
    """The files export writes: the patches folder, its README.md's series
    table included."""
    return {
        p.name: p.read_bytes()
        for p in layout.patches.iterdir() if p.is_file()
    }


def check_series(layout: Line) -> None:
    lint_series(layout)
    before = _snapshot(layout)
    apply(layout)
    export(layout)
    after = _snapshot(layout)
    changed = sorted(n for n in before.keys() | after.keys()
                     if before.get(n) != after.get(n))
    if changed:
        raise UserError(
            "apply + export changed " + ", ".join(changed),
            "the files are not what `make export` writes: review "
            f"`git diff {layout.folder}/` and commit the result")
    # The patches are the product: they must be committed (when patches/
    # is in a git checkout at all).
    status = GitRepo(layout.patches).run("status", "--porcelain", ".")
    if status.returncode == 0 and status.stdout.strip():
        files = ", ".join(line[3:] for line in status.stdout.splitlines())
        raise UserError(
            f"{layout.folder}/ has uncommitted changes: {files}",
            f"commit {layout.folder}/ (the series is the product)")
    print(f"check-series: {len(read_series(layout))} patches apply, "
          "re-export identically and are upstream-shaped")
