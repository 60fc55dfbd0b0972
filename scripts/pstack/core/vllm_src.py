"""vllm-src, the git repository `make apply` generates:

  branch `upstream`  one commit per imported release, each tagged v<version>
  branch `series`    the patches of patches/series, applied with `git am`

plus two files of the tooling's own in its .git: the tip `make apply` or
`make export` last left (nothing unexported when the branch is still
there), and the state of a `make rebase` under way.
"""

from __future__ import annotations

from pathlib import Path

from .errors import UserError
from .gitrepo import GitRepo
from .pin import BasePin

UPSTREAM = "upstream"
SERIES = "series"


class VllmSrc(GitRepo):

    @property
    def synced_tip_file(self) -> Path:
        """Holds the tip of `series` as the last apply or export left it."""
        return self.git_dir / "pstack-applied"

    @property
    def rebase_state_file(self) -> Path:
        return self.git_dir / "pstack-rebase.json"

    def series_range(self, pin: BasePin) -> str:
        return f"{pin.tag}..{SERIES}"

    def series_commits(self, pin: BasePin) -> list[str]:
        return self.commits(self.series_range(pin))

    def base_of_series(self, pin: BasePin) -> str:
        """The pinned base tag, once checked that `series` grows from it."""
        if self.rev(pin.tag) is None:
            raise UserError(f"vllm-src has no tag {pin.tag} (pinned base)",
                            "run `make apply` to import it")
        if not self.is_ancestor(pin.tag, SERIES):
            raise UserError(
                f"branch `{SERIES}` in vllm-src is not based on {pin.tag}",
                f"rebase it: git -C vllm-src rebase --onto {pin.tag} "
                f"<old-base> {SERIES}")
        return pin.tag

    def finish_hint(self, op: str) -> str:
        """How to get out of `op` (a git command stopped half-way)."""
        if op == "git rebase" and self.rebase_state_file.exists():
            return ("a `make rebase` stopped at a conflict: resolve, `git "
                    "add`, then re-run `make rebase TO=<version>`; or `make "
                    "rebase-abort`")
        cmd = op.split()[-1]
        return (f"finish it (resolve, `git add`, `git -C {self.path} {cmd} "
                "--continue`, then `make export`) or drop it (`git -C "
                f"{self.path} {cmd} --abort`)")

    def refuse_operation_in_progress(self) -> None:
        op = self.operation_in_progress()
        if op:
            raise UserError(f"a {op} is in progress in {self.path}",
                            self.finish_hint(op))

    def scratch_worktree(self, tree: Path, ref: str) -> GitRepo:
        """A detached worktree at `ref` in `tree` (created on first use).

        It shares vllm-src's compiled extensions (the series changes Python
        only): each `vllm/**/*.so` of vllm-src that git does not track is
        linked at the same place in the worktree.
        """
        if not (tree / ".git").exists():
            tree.parent.mkdir(parents=True, exist_ok=True)
            self.git("worktree", "add", "-f", "--detach", str(tree), ref)
        else:
            GitRepo(tree).git("checkout", "-q", "--detach", ref)
        for rel in self.untracked_binaries():
            link = tree / rel
            if not link.exists() and not link.is_symlink():
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(self.path.resolve() / rel)
        return GitRepo(tree)

    def untracked_binaries(self) -> list[str]:
        """The `vllm/**/*.so` files here that git does not track (built in
        place, or linked from a published wheel), relative to the tree."""
        package = self.path / "vllm"
        found = [
            p.relative_to(self.path).as_posix()
            for p in sorted(package.rglob("*.so"))
            if p.is_file() or p.is_symlink()
        ]
        if not found:
            return []
        tracked = set(self.git("ls-files", "-z", "--", "vllm").split("\0"))
        return [rel for rel in found if rel not in tracked]
