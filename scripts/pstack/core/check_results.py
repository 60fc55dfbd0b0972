"""The result of checking one prefix of the series (`make check-bisect`),
and the file that keeps them per tree: check-bisect reuses a passing
record, `make pr` quotes it."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

KEEP = 200  # records in the file, most recent first


@dataclass
class PatchResult:
    subject: str
    commit: str = ""
    tree: str = ""  # the tree of the prefix: what the checks saw
    checks: dict[str, str] = field(default_factory=dict)  # name -> "ok"/why
    tests: list[str] = field(default_factory=list)  # the patch's test files
    ran: str = ""  # where and how the tests ran, for people
    seconds: float = 0.0
    date: str = ""
    env: str = ""  # what else decided the outcome (see check_bisect.env_key)
    # Test files not run at this prefix: --no-tests, or taken from make
    # test's run at the tip because they are the same there.
    tests_skipped: bool = False
    tip_files: list[str] = field(default_factory=list)
    # The date of the record this one repeats ("": checked in this run).
    reused_from: str = ""

    @property
    def ok(self) -> bool:
        return all(v == "ok" for v in self.checks.values())

    @property
    def complete(self) -> bool:
        """Passed with every test file run at its own prefix: a record that
        stands for the tree as long as the environment is the same."""
        return (self.ok and bool(self.checks) and not self.tests_skipped
                and not self.tip_files)

    @classmethod
    def from_dict(cls, data: dict) -> PatchResult:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def load_results(path: Path) -> list[PatchResult]:
    """Recorded results, most recent first (records of older formats are
    skipped)."""
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return []
    return [
        PatchResult.from_dict(r) for r in data
        if isinstance(r, dict) and "tree" in r and "checks" in r
    ]


def save_results(path: Path, results: list[PatchResult]) -> None:
    """Record `results`, replacing older records of the same trees."""
    trees = {r.tree for r in results}
    old = [r for r in load_results(path) if r.tree not in trees]
    path.parent.mkdir(parents=True, exist_ok=True)
    records = [asdict(r) for r in results + old][:KEEP]
    path.write_text(json.dumps(records, indent=1) + "\n")
