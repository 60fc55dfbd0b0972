"""patches/series and the patch files: which patches apply in which order,
and the commits of vllm-src written out as patch files, byte for byte the
same on every machine."""

from __future__ import annotations

import hashlib
from pathlib import Path

from .errors import UserError
from .gitrepo import PORTABLE_CONFIG, GitRepo
from .line import Line
from .patch import Patch, file_name

# Byte-stable export: full blob ids for `am -3`, no commit ids or git
# version, the subject as it is.
FORMAT_PATCH = [
    "format-patch", "--zero-commit", "--full-index", "--no-signature",
    "--keep-subject", "--stat=80", "--no-renames", "--no-numbered",
    "--no-cover-letter", "--no-thread", "--encode-email-headers"
]


def read_series(layout: Line) -> list[str]:
    """The patch file names, in order."""
    path = layout.series_file
    if not path.exists():
        raise UserError(f"{path} is missing",
                        "restore it with `git checkout -- patches/series`")
    names = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        name = line.split("#", 1)[0].strip()
        if not name:
            continue
        if not (layout.patches / name).is_file():
            raise UserError(
                f"patches/series line {lineno}: {name} does not exist")
        names.append(name)
    return names


def write_series(layout: Line, names: list[str]) -> None:
    """Write the order, keeping the file's comment lines."""
    path = layout.series_file
    header = [
        line for line in path.read_text().splitlines() if line.startswith("#")
    ] if path.exists() else []
    path.write_text("\n".join(header + names) + "\n")


def read_patches(layout: Line) -> list[tuple[str, Patch]]:
    """(file name, patch) of every patch in the series, in order."""
    return [(name, Patch.from_file(layout.patches / name))
            for name in read_series(layout)]


def series_label(layout: Line) -> str:
    """Local version label of the series in patches/: patch count + content
    digest."""
    names = read_series(layout)
    return label_of([layout.patches / name for name in names])


def label_of(patch_files: list[Path]) -> str:
    """Local version label of a series given as its patch files, in order.

    It never says "cpu": vLLM picks its CPU platform when the installed
    version does.
    """
    h = hashlib.sha256()
    for path in patch_files:
        h.update(path.read_bytes())
    label = f"kvoffload.{len(patch_files)}.g{h.hexdigest()[:8]}"
    assert "cpu" not in label and "-" not in label, label
    return label


def format_patches(repo: GitRepo, base: str, tip: str,
                   outdir: Path) -> list[str]:
    """Write the commits `base..tip` as patch files into `outdir`, named by
    their subjects (see patch.file_name); return the names in order."""
    revs = f"{base}..{tip}"
    proc = repo.run(*FORMAT_PATCH,
                    f"--base={base}",
                    "-o",
                    str(outdir),
                    revs,
                    env=PORTABLE_CONFIG)
    if proc.returncode != 0:
        raise UserError(f"git format-patch failed: {proc.stderr.strip()}")
    written = proc.stdout.splitlines()
    subjects = repo.subjects(revs)
    assert len(written) == len(subjects), (written, subjects)
    names: list[str] = []
    for numbered, subject in zip(written, subjects):
        name = file_name(subject)
        if name in names:
            raise UserError(f"two patches would both be named {name}",
                            "give one of them a different subject")
        Path(numbered).rename(outdir / name)
        names.append(name)
    return names


def format_patch(repo: GitRepo, commit: str) -> str:
    """One commit as `git am` takes it, exactly as export writes it."""
    return repo.git(*FORMAT_PATCH,
                    "--stdout",
                    f"{commit}~1..{commit}",
                    env=PORTABLE_CONFIG)
