"""The todo list `make rebase` gives `git rebase --interactive`.

git runs this module as its sequence editor (GIT_SEQUENCE_EDITOR, with no
person in the loop) on the todo file; the plan comes in the environment:
the commits to leave out (`pick` becomes `drop`: absorbed upstream) and the
commits to replace by a recorded version of their patch (`pick` becomes
`exec git am <file>`: a resolution made once, replayed).
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
        lines = []
        for line in todo.splitlines(keepends=True):
            words = line.split(maxsplit=2)
            commit = None
            if len(words) >= 2 and words[0] in ("pick", "p"):
                commit = self._commit(words[1])
            if commit in self.drop:
                line = "drop" + line[len(words[0]):]
            elif commit in self.replay:
                command = " ".join(
                    shlex.quote(word)
                    for word in (*GIT_AM, self.replay[commit]))
                line = f"exec {command}\n"
            lines.append(line)
        return "".join(lines)

    def _commit(self, abbreviated: str) -> str | None:
        """The planned commit an abbreviated id in the todo names."""
        for commit in (*self.drop, *self.replay):
            if commit.startswith(abbreviated):
                return commit
        return None


def main() -> None:
    todo = Path(sys.argv[1])
    plan = TodoPlan(**json.loads(os.environ[PLAN_ENV]))
    todo.write_text(plan.edit(todo.read_text()))


if __name__ == "__main__":
    main()
