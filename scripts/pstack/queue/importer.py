"""Releases imported into vllm-src as commits on branch `upstream`.

Files that vLLM's own .gitignore ignores (vllm/_version.py, the stale
vllm/vllm_flash_attn copies, csrc/**/generated/**, vllm.egg-info) are not
imported: the imported tree is what upstream's git has at the tag, which is
what upstream-shaped patches are written against. setuptools-scm writes
vllm/_version.py at build time.

The exception is the package's own source that upstream tracks although a
general pattern ignores it: vLLM 0.10 has vllm/benchmarks/lib/, which its
`lib/` pattern covers (without it, `vllm serve` does not start). Every
ignored file under vllm/ is imported, except the build outputs above.
"""

from __future__ import annotations

import os
import tarfile
import tempfile
from pathlib import Path

from ..core.download import fetch
from ..core.errors import UserError, progress
from ..core.gitrepo import PORTABLE_CONFIG, RELEASE_IMPORTER
from ..core.pin import BasePin
from ..core.vllm_src import UPSTREAM, VllmSrc

# What the build writes into the package (and upstream's git ignores).
PACKAGE_BUILD_OUTPUTS = ("vllm/_version.py", "vllm/vllm_flash_attn/")


def _release_date(tarball: Path) -> int:
    with tarfile.open(tarball) as tf:
        first = tf.next()
        return int(first.mtime) if first else 0


def import_release(src: VllmSrc, tarball: Path, version: str,
                   parent: str | None) -> str:
    """Commit the release tree as a child of `parent` (the previous base's
    import, or None for the first), point `upstream` at it and tag it;
    return the commit.

    The worktree of `src` is not touched: the tarball is staged through a
    temporary index and work tree. Identity and date are fixed, so the same
    tarball on the same parent gives the same commit id on every machine.
    """
    tag = f"v{version}"
    progress(f"importing {tarball.name} as {tag} on branch {UPSTREAM}")
    identity = {
        **PORTABLE_CONFIG,
        **RELEASE_IMPORTER.author(),
        **RELEASE_IMPORTER.committer(),
    }
    with tempfile.TemporaryDirectory(dir=src.path.parent) as tmp:
        with tarfile.open(tarball) as tf:
            tf.extractall(tmp, filter="tar")
        tops = os.listdir(tmp)
        if len(tops) != 1:
            raise UserError(f"{tarball.name}: expected one top-level "
                            f"directory, got {tops}")
        env = {
            **identity,
            "GIT_INDEX_FILE": str(Path(tmp) / "index"),
            "GIT_WORK_TREE": str(Path(tmp) / tops[0]),
        }
        src.git("add", "-A", ".", env=env)
        ignored = src.git("ls-files",
                          "--others",
                          "--ignored",
                          "--exclude-standard",
                          "-z",
                          "--",
                          "vllm/",
                          env=env).split("\0")
        tracked_upstream = [
            f for f in ignored if f and not f.startswith(PACKAGE_BUILD_OUTPUTS)
        ]
        if tracked_upstream:
            src.git("add", "-f", "--", *tracked_upstream, env=env)
        tree = src.git("write-tree", env=env).strip()
    date = f"{_release_date(tarball)} +0000"
    env = {**identity, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    args = [
        "commit-tree", tree, "-m", f"Import vLLM {version} from {tarball.name}"
    ]
    if parent:
        args += ["-p", parent]
    sha = src.git(*args, env=env).strip()
    src.git("update-ref", f"refs/heads/{UPSTREAM}", sha)
    src.git("tag", "-f", tag, sha)
    return sha


def import_base(src: VllmSrc,
                pin: BasePin,
                cache: Path,
                base_commit: str | None = None) -> None:
    """Import the pinned base on `upstream`, preceded by the earlier bases
    it was rebased from (pin.previous), unless the tags already exist.

    `base_commit` is the commit the series was exported on (the first
    patch's base-commit trailer). Existing tags that lead to another commit
    were made by an earlier import whose rules differ (before vLLM 0.10's
    vllm/benchmarks/lib/ was imported, say): the releases are imported
    again, as they would be in a fresh checkout. The old commits stay
    reachable from the branches made on them.
    """
    current = src.rev(pin.tag)
    if base_commit and current not in (None, base_commit):
        progress(f"{pin.tag} in {src.path} is {current[:12]}, not the "
                 f"series' base-commit {base_commit[:12]} (an import by "
                 "other rules): importing the releases again")
        for release in (*pin.previous, pin.release):
            if src.rev(release.tag) is not None:
                src.git("tag", "-d", release.tag)
    parent = None
    for release in (*pin.previous, pin.release):
        sha = src.rev(release.tag)
        if sha is None:
            tarball = fetch(release.sdist, release.sdist_sha256, cache)
            sha = import_release(src, tarball, release.version, parent)
        parent = sha
    if base_commit and parent != base_commit:
        raise UserError(
            f"importing {pin.sdist} gives {pin.tag} = {parent[:12]}, but the "
            f"series was exported on {base_commit[:12]} (the base-commit of "
            "its first patch)", "the importer's rules changed since the "
            "series was exported: `make export` on the new import, and "
            "commit the patches")


def init_repo(src: VllmSrc) -> None:
    """An empty repository at src (refusing a directory of other files)."""
    if src.path.exists() and not src.exists() and any(src.path.iterdir()):
        raise UserError(
            f"{src.path} exists but is not a git repository",
            f"move it away (`mv {src.path} {src.path}.old`) and re-run")
    src.path.mkdir(parents=True, exist_ok=True)
    if not src.exists():
        src.git("init", "-q", "-b", UPSTREAM)
