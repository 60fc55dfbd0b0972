"""Materialize `vllm-src` (base release + series as git commits) and export it back.

Layout of the generated repo:
  branch `upstream`  one commit per imported release, each tagged `v<version>`
  branch `series`    the patches of `patches/series`, applied with `git am`

Files that vLLM's own .gitignore ignores (vllm/_version.py, the stale
vllm/vllm_flash_attn copies, csrc/**/generated/**, vllm.egg-info) are not
imported: the imported tree is what upstream's git has at the tag, which is
what upstream-shaped patches are written against. setuptools-scm writes
vllm/_version.py at build time.

Safety: nothing that is not already in `patches/` is ever discarded. apply
refuses while vllm-src has uncommitted changes, an unfinished `git am`, or
commits on `series` that `make export` has not written to patches/.
"""

from __future__ import annotations

import filecmp
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

from .common import GIT_ENV, BasePin, Paths, UserError, git, progress
from .fetch import fetch, fetch_sdist

UPSTREAM = "upstream"
SERIES = "series"
STATE_FILE = "pstack-applied"
REBASE_STATE = "pstack-rebase.json"  # a `make rebase` under way (see rebase.py)

# Byte-stable export: full blob ids for `am -3`, no commit ids or git version.
FORMAT_PATCH_ARGS = [
    "format-patch", "--zero-commit", "--full-index", "--no-signature",
    "--keep-subject", "--stat=80", "--no-renames", "--no-numbered",
    "--no-cover-letter", "--no-thread", "--encode-email-headers",
]
# Ignore user/system git config so every machine exports the same bytes.
EXPORT_ENV = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
PATCH_ID = re.compile(r"^\d{4}-")


# ---------------------------------------------------------------- series file

def read_series(paths: Paths) -> list[str]:
    if not paths.series_file.exists():
        raise UserError(f"{paths.series_file} is missing",
                        "restore it with `git checkout -- patches/series`")
    names = []
    for lineno, line in enumerate(paths.series_file.read_text().splitlines(), 1):
        name = line.split("#", 1)[0].strip()
        if not name:
            continue
        if not (paths.patches / name).is_file():
            raise UserError(f"patches/series line {lineno}: {name} does not exist")
        names.append(name)
    return names


def write_series(paths: Paths, names: list[str]) -> None:
    header = [line for line in paths.series_file.read_text().splitlines()
              if line.startswith("#")] if paths.series_file.exists() else []
    paths.series_file.write_text("\n".join(header + names) + "\n")


# ---------------------------------------------------------------- repo state

def _git_dir(src: Path) -> Path:
    return src / ".git"


def operation_in_progress(src: Path) -> str | None:
    gd = _git_dir(src)
    if (gd / "rebase-apply").exists():
        return "git am" if (gd / "rebase-apply" / "applying").exists() else "git rebase"
    if (gd / "rebase-merge").exists():
        return "git rebase"
    for marker, what in (("MERGE_HEAD", "git merge"), ("CHERRY_PICK_HEAD", "git cherry-pick")):
        if (gd / marker).exists():
            return what
    return None


def uncommitted_changes(src: Path) -> list[str]:
    out = git(src, "status", "--porcelain", "--untracked-files=normal")
    return [line[3:] for line in out.splitlines()]


def rev(src: Path, ref: str) -> str | None:
    out = git(src, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    return out.strip() or None


def series_subjects(src: Path, base_tag: str) -> list[str]:
    out = git(src, "log", "--reverse", "--format=%s", f"{base_tag}..{SERIES}")
    return out.splitlines()


def _state_path(src: Path) -> Path:
    return _git_dir(src) / STATE_FILE


def _unexported_commits(paths: Paths, pin: BasePin) -> list[str]:
    """Subjects of `series` commits whose export would change patches/ ('' if none)."""
    src = paths.src
    tip = rev(src, SERIES)
    if tip is None:
        return []
    state = _state_path(src)
    if state.exists() and state.read_text().strip() == tip:
        return []  # series is exactly what the last apply produced
    base = _base_of_series(src, pin)
    with tempfile.TemporaryDirectory() as tmp:
        names = format_series(src, base, Path(tmp))
        current = read_series(paths) if paths.series_file.exists() else []
        same = names == current and all(
            filecmp.cmp(Path(tmp) / n, paths.patches / n, shallow=False) for n in names)
    return [] if same else series_subjects(src, base)


def _base_of_series(src: Path, pin: BasePin) -> str:
    if rev(src, pin.tag) is None:
        raise UserError(f"vllm-src has no tag {pin.tag} (pinned base)",
                        "run `make apply` to import it")
    if not _is_ancestor(src, pin.tag, SERIES):
        raise UserError(f"branch `{SERIES}` in vllm-src is not based on {pin.tag}",
                        f"rebase it: git -C vllm-src rebase --onto {pin.tag} <old-base> {SERIES}")
    return pin.tag


def _is_ancestor(src: Path, a: str, b: str) -> bool:
    return subprocess.run(["git", "-C", str(src), "merge-base", "--is-ancestor", a, b],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


def finish_hint(src: Path, op: str) -> str:
    if op == "git rebase" and (_git_dir(src) / REBASE_STATE).exists():
        return ("a `make rebase` stopped at a conflict: resolve, `git add`, then re-run "
                "`make rebase TO=<version>`; or `make rebase-abort`")
    cmd = op.split()[-1]
    return (f"finish it (resolve, `git add`, `git -C {src} {cmd} --continue`, then "
            f"`make export`) or drop it (`git -C {src} {cmd} --abort`)")


def ensure_safe_to_reset(paths: Paths, pin: BasePin, force: bool = False) -> None:
    src = paths.src
    op = operation_in_progress(src)
    if op:
        raise UserError(f"a {op} is in progress in {src}", finish_hint(src, op))
    dirty = uncommitted_changes(src)
    if dirty:
        shown = ", ".join(dirty[:5]) + (" ..." if len(dirty) > 5 else "")
        raise UserError(f"{src} has uncommitted changes ({shown}); refusing to overwrite",
                        "commit them onto the series and `make export`, or stash them")
    if rev(src, pin.tag) is None or rev(src, SERIES) is None:
        return
    unexported = _unexported_commits(paths, pin)
    if unexported and not force:
        raise UserError(
            f"{src} branch `{SERIES}` has commits not exported to patches/: "
            + "; ".join(unexported[-3:]),
            "keep them with `make export`, or discard them with `make apply FORCE=1`"
            " (a backup branch is kept)")
    if unexported:
        backup = f"backup/{SERIES}-{time.strftime('%Y%m%d-%H%M%S')}"
        git(src, "branch", "-f", backup, SERIES)
        progress(f"kept the discarded commits on branch {backup}")


# ---------------------------------------------------------------- import

def _release_date(tarball: Path) -> int:
    with tarfile.open(tarball) as tf:
        first = tf.next()
        return int(first.mtime) if first else 0


def import_release(src: Path, tarball: Path, version: str, parent: str | None) -> str:
    """Commit the release tree as a child of `parent` (the previous base's import, or
    None for the first), point `upstream` at it and tag it; return the sha.

    The worktree of `src` is not touched: the tarball is staged through a
    temporary index and work tree. Identity and date are fixed, so the same
    tarball on the same parent gives the same commit id on every machine.
    """
    tag = f"v{version}"
    progress(f"importing {tarball.name} as {tag} on branch {UPSTREAM}")
    with tempfile.TemporaryDirectory(dir=src.parent) as tmp:
        with tarfile.open(tarball) as tf:
            tf.extractall(tmp, filter="tar")
        tops = os.listdir(tmp)
        if len(tops) != 1:
            raise UserError(f"{tarball.name}: expected one top-level directory, got {tops}")
        tree_dir = Path(tmp) / tops[0]
        env = {**GIT_ENV, "GIT_INDEX_FILE": str(Path(tmp) / "index"),
               "GIT_WORK_TREE": str(tree_dir)}
        git(src, "add", "-A", ".", env=env)
        tree = git(src, "write-tree", env=env).strip()
    date = f"{_release_date(tarball)} +0000"
    env = {**GIT_ENV, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    args = ["commit-tree", tree, "-m", f"Import vLLM {version} from {tarball.name}"]
    if parent:
        args += ["-p", parent]
    sha = git(src, *args, env=env).strip()
    git(src, "update-ref", f"refs/heads/{UPSTREAM}", sha)
    git(src, "tag", "-f", tag, sha)
    return sha


def import_base(src: Path, pin: BasePin, cache: Path) -> None:
    """Import the pinned base on `upstream`, preceded by the earlier bases it was
    rebased from (pin.previous), unless the tags already exist."""
    parent = None
    for release in (*pin.previous, pin.release):
        sha = rev(src, release.tag)
        if sha is None:
            tarball = fetch(release.sdist, release.sdist_sha256, cache)
            sha = import_release(src, tarball, release.version, parent)
        parent = sha


def init_repo(src: Path) -> None:
    if src.exists() and not _git_dir(src).exists():
        if any(src.iterdir()):
            raise UserError(f"{src} exists but is not a git repository",
                            f"move it away (`mv {src} {src}.old`) and re-run")
    src.mkdir(parents=True, exist_ok=True)
    if not _git_dir(src).exists():
        git(src, "init", "-q", "-b", UPSTREAM)


# ---------------------------------------------------------------- apply

def apply(paths: Paths, *, force: bool = False) -> str:
    pin = BasePin.load(paths.base_file)
    names = read_series(paths)
    fetch_sdist(pin, paths.cache)
    src = paths.src
    init_repo(src)
    if rev(src, SERIES) is not None:
        ensure_safe_to_reset(paths, pin, force=force)
    import_base(src, pin, paths.cache)
    git(src, "checkout", "-q", "-f", "-B", SERIES, pin.tag)
    _state_path(src).unlink(missing_ok=True)
    if names:
        progress(f"applying {len(names)} patches onto {pin.tag}")
        _am(paths, names)
    tip = rev(src, SERIES)
    _state_path(src).write_text(tip + "\n")
    progress(f"vllm-src: branch {SERIES} = {pin.tag} + {len(names)} patches ({tip[:12]})")
    return tip


def _am(paths: Paths, names: list[str]) -> None:
    src = paths.src
    env = {**os.environ, "GIT_COMMITTER_NAME": "vLLM patch stack",
           "GIT_COMMITTER_EMAIL": "noreply@vllm.invalid"}
    files = [str((paths.patches / n).resolve()) for n in names]
    proc = subprocess.run(
        ["git", "-C", str(src), "am", "--3way", "--keep", "--keep-cr",
         "--committer-date-is-author-date", "--quiet", *files],
        env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if proc.returncode == 0:
        return
    next_file = _git_dir(src) / "rebase-apply" / "next"
    index = int(next_file.read_text()) - 1 if next_file.exists() else 0
    failed = names[index] if 0 <= index < len(names) else "?"
    conflicts = git(src, "diff", "--name-only", "--diff-filter=U", check=False).split()
    if not conflicts:
        conflicts = sorted(set(re.findall(r"patch failed: ([^:\n]+):", proc.stderr)))
    files_msg = ", ".join(conflicts) if conflicts else "see `git am --show-current-patch=diff`"
    raise UserError(
        f"patch {index + 1}/{len(names)} {failed} does not apply; conflicting files: {files_msg}",
        f"resolve in {src}, `git add` the files, `git -C {src} am --continue`, then "
        f"`make export`; or give up with `git -C {src} am --abort`")


# ---------------------------------------------------------------- export

def format_series(src: Path, base: str, outdir: Path) -> list[str]:
    """format-patch `base..series` into outdir with names free of numbers; return the order."""
    proc = subprocess.run(
        ["git", "-C", str(src), *FORMAT_PATCH_ARGS, f"--base={base}",
         "-o", str(outdir), f"{base}..{SERIES}"],
        env={**os.environ, **EXPORT_ENV}, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if proc.returncode != 0:
        raise UserError(f"git format-patch failed: {proc.stderr.strip()}")
    names = []
    for line in proc.stdout.splitlines():
        numbered = Path(line)
        name = PATCH_ID.sub("", numbered.name)
        if name in names:
            raise UserError(f"two patches would both be named {name}",
                            "give one of them a different subject")
        numbered.rename(outdir / name)
        names.append(name)
    return names


def export(paths: Paths) -> list[str]:
    pin = BasePin.load(paths.base_file)
    src = paths.src
    if not _git_dir(src).exists():
        raise UserError(f"{src} does not exist", "run `make apply` first")
    op = operation_in_progress(src)
    if op:
        raise UserError(f"a {op} is in progress in {src}", finish_hint(src, op))
    if rev(src, SERIES) is None:
        raise UserError(f"{src} has no branch `{SERIES}`", "run `make apply` first")
    dirty = uncommitted_changes(src)
    if dirty:
        print(f"warning: {len(dirty)} uncommitted change(s) in {src} are not exported "
              "(commit them onto the series first)")
    base = _base_of_series(src, pin)
    paths.patches.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        names = format_series(src, base, Path(tmp))
        changed = 0
        for name in names:
            dest = paths.patches / name
            if not dest.exists() or not filecmp.cmp(Path(tmp) / name, dest, shallow=False):
                shutil.copyfile(Path(tmp) / name, dest)
                changed += 1
    removed = [p for p in paths.patches.glob("*.patch") if p.name not in names]
    for p in removed:
        p.unlink()
    write_series(paths, names)
    _state_path(src).write_text(rev(src, SERIES) + "\n")
    progress(f"exported {len(names)} patches to {paths.patches} "
             f"({changed} written, {len(removed)} removed)")
    return names


def sync(paths: Paths) -> None:
    """Bring vllm-src up to date with patches/ unless it holds work of its own.

    Used by `make test`/`make setup`: a fresh clone gets vllm-src applied; a
    developer's vllm-src with local commits or edits is tested as it is.
    """
    if _git_dir(paths.src).exists():
        try:
            ensure_safe_to_reset(paths, BasePin.load(paths.base_file))
        except UserError as e:
            progress(f"using vllm-src as it is: {e}")
            return
    apply(paths)


def scratch_worktree(paths: Paths, name: str, ref: str) -> Path:
    """A detached worktree of vllm-src at `ref` in build/<name>.

    It shares vllm-src's compiled extension: the series changes Python only.
    """
    tree = paths.src.parent / "build" / name
    if not (tree / ".git").exists():
        tree.parent.mkdir(exist_ok=True)
        git(paths.src, "worktree", "add", "-f", "--detach", str(tree), ref)
    else:
        git(tree, "checkout", "-q", "--detach", ref)
    so = tree / "vllm" / "_C.abi3.so"
    if not so.exists() and not so.is_symlink():
        so.symlink_to(paths.src.resolve() / "vllm" / "_C.abi3.so")
    return tree
