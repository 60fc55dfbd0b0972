"""The todo list `make rebase` gives `git rebase --interactive`.

git runs this module as its sequence editor (GIT_SEQUENCE_EDITOR, with no
person in the loop) on the todo file; the plan comes in the environment:
the commits to leave out (`pick` becomes `drop`: absorbed upstream, or left out
of the line), the commits to replace by a recorded version of their patch
(`pick` becomes `exec git am <file>`: a resolution made once, replayed),
and the patches written in the line, added after the commit before them
(`exec git am <file>` lines).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

PLAN_ENV = "PSTACK_TODO_PLAN"

# As `make apply` applies patches: subjects kept as they are, the author's
# date as the committer's (the committer comes from the rebase's
# environment), so the replayed commits are those `make apply` would make.
GIT_AM = ("git", "am", "--3way", "--keep", "--keep-cr",
          "--committer-date-is-author-date", "--quiet")


@dataclass
class TodoPlan:
    drop: list[str] = field(default_factory=list)  # full commit ids
    replay: dict[str, str] = field(default_factory=dict)  # commit -> file
    # commit -> files to add after it ("": before the first commit)
    insert: dict[str, list[str]] = field(default_factory=dict)

    def environment(self) -> dict[str, str]:
        """The environment that makes `git rebase -i` follow the plan."""
        scripts = Path(__file__).resolve().parents[2]
        editor = (f"PYTHONPATH={shlex.quote(str(scripts))} "
                  f"{shlex.quote(sys.executable)} -m pstack.queue.todo")
        return {
            "GIT_SEQUENCE_EDITOR": editor,
            PLAN_ENV: json.dumps(asdict(self))
        }

    def edit(self, todo: str) -> str:
        """The todo with the plan applied; other lines as they are."""
        lines = [self._git_am(f) for f in self.insert.get("", [])]
        for line in todo.splitlines(keepends=True):
            words = line.split(maxsplit=2)
            commit = None
            if len(words) >= 2 and words[0] in ("pick", "p"):
                commit = self._commit(words[1])
            if commit in self.drop:
                line = "drop" + line[len(words[0]):]
            elif commit in self.replay:
                line = self._git_am(self.replay[commit])
            lines.append(line)
            if commit:
                lines += [self._git_am(f) for f in self.insert.get(commit, [])]
        return "".join(lines)

    @staticmethod
    def _git_am(patch: str) -> str:
        return "exec " + " ".join(
            shlex.quote(word) for word in (*GIT_AM, patch)) + "\n"

    def _commit(self, abbreviated: str) -> str | None:
        """The planned commit an abbreviated id in the todo names."""
        for commit in (*self.drop, *self.replay, *self.insert):
            if not commit:
                continue
            if commit.startswith(abbreviated):
                return commit
        return None


def main() -> None:
    todo = Path(sys.argv[1])
    plan = TodoPlan(**json.loads(os.environ[PLAN_ENV]))
    todo.write_text(plan.edit(todo.read_text()))


if __name__ == "__main__":
    main()
