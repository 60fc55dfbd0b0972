"""A small git repository class, and the fixed identities that make commit
ids reproducible."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Identity:
    name: str
    email: str

    def author(self) -> dict[str, str]:
        return {"GIT_AUTHOR_NAME": self.name, "GIT_AUTHOR_EMAIL": self.email}

    def committer(self) -> dict[str, str]:
        return {
            "GIT_COMMITTER_NAME": self.name,
            "GIT_COMMITTER_EMAIL": self.email
        }


# With a fixed identity and date, the same release tarball gives the same
# import commit, and the same patches on it the same commits, on every
# machine: `make apply`, `make rebase` and `make pr` all commit as these.
RELEASE_IMPORTER = Identity("vLLM release import", "noreply@vllm.invalid")
STACK_COMMITTER = Identity("vLLM patch stack", "noreply@vllm.invalid")

# Ignore the user's and the system's git config where it could change bytes
# (format-patch output, imported trees).
PORTABLE_CONFIG = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}

# `git status --porcelain` codes of unmerged paths.
UNMERGED = {"DD", "AU", "UD", "UA", "DU", "AA", "UU"}


class GitRepo:
    """The git repository (or worktree) at `path`."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"GitRepo({str(self.path)!r})"

    @property
    def git_dir(self) -> Path:
        return self.path / ".git"

    def exists(self) -> bool:
        return self.git_dir.exists()

    def run(self,
            *args: str,
            env: dict[str, str] | None = None,
            input: str | None = None) -> subprocess.CompletedProcess:
        """git with `args`; the caller looks at the return code."""
        return subprocess.run(["git", "-C", str(self.path), *args],
                              text=True,
                              input=input,
                              env={
                                  **os.environ,
                                  **(env or {})
                              },
                              capture_output=True)

    def git(self,
            *args: str,
            check: bool = True,
            env: dict[str, str] | None = None,
            input: str | None = None) -> str:
        """git with `args`: its stdout; stderr goes into the error."""
        proc = self.run(*args, env=env, input=input)
        if check and proc.returncode != 0:
            raise subprocess.CalledProcessError(proc.returncode, proc.args,
                                                proc.stdout, proc.stderr)
        return proc.stdout

    def rev(self, ref: str) -> str | None:
        """The commit `ref` names, or None."""
        out = self.git("rev-parse",
                       "--verify",
                       "--quiet",
                       f"{ref}^{{commit}}",
                       check=False)
        return out.strip() or None

    def tree(self, ref: str) -> str:
        return self.git("rev-parse", f"{ref}^{{tree}}").strip()

    def is_ancestor(self, a: str, b: str) -> bool:
        return self.run("merge-base", "--is-ancestor", a, b).returncode == 0

    def commits(self, revs: str) -> list[str]:
        """The commits of a range like `v0.9.2..series`, oldest first."""
        return self.git("rev-list", "--reverse", revs).split()

    def subject(self, commit: str) -> str:
        return self.git("log", "-1", "--format=%s", commit).strip()

    def subjects(self, revs: str) -> list[str]:
        return self.git("log", "--reverse", "--format=%s", revs).splitlines()

    def changed_files(self, commit: str, filter: str = "") -> list[str]:
        """Files the commit changes (`filter`: a --diff-filter, e.g. AM)."""
        args = ["diff-tree", "--no-commit-id", "--name-only", "-r"]
        if filter:
            args.append(f"--diff-filter={filter}")
        return self.git(*args, commit).split()

    def operation_in_progress(self) -> str | None:
        """The git command that stopped half-way here, e.g. 'git am'."""
        gd = self.git_dir
        if (gd / "rebase-apply").exists():
            if (gd / "rebase-apply" / "applying").exists():
                return "git am"
            return "git rebase"
        if (gd / "rebase-merge").exists():
            return "git rebase"
        for marker, what in (("MERGE_HEAD", "git merge"), ("CHERRY_PICK_HEAD",
                                                           "git cherry-pick")):
            if (gd / marker).exists():
                return what
        return None

    def uncommitted_changes(self) -> list[str]:
        """Changed and untracked (not ignored) paths."""
        out = self.git("status", "--porcelain", "--untracked-files=normal")
        return [line[3:] for line in out.splitlines()]

    def unmerged(self) -> dict[str, str]:
        """Unmerged path -> its status code (UU, DU, UD, AA, ...)."""
        out = self.git("status", "--porcelain", "--untracked-files=no")
        return {
            line[3:]: line[:2]
            for line in out.splitlines() if line[:2] in UNMERGED
        }
