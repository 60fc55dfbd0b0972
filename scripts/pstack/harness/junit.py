"""Test counts: read from the JUnit XML a pytest --junitxml run writes, and
the "total: ..." line that ends every `make test` run."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

# The last line of every `make test` run.
TOTAL = re.compile(r"^total: (\d+) passed, (\d+) failed, (\d+) skipped$")


@dataclass(frozen=True)
class Counts:
    """Tests passed, failed and skipped in a part of the run.

    >>> Counts(passed=3) + Counts(failed=1, skipped=2)
    Counts(passed=3, failed=1, skipped=2)
    """

    passed: int = 0
    failed: int = 0
    skipped: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.passed + other.passed, self.failed + other.failed,
                      self.skipped + other.skipped)

    def total_line(self) -> str:
        """The line that ends a run, which `from_total_line` reads back.

        >>> Counts(4, 1, 2).total_line()
        'total: 4 passed, 1 failed, 2 skipped'
        """
        return (f"total: {self.passed} passed, {self.failed} failed, "
                f"{self.skipped} skipped")

    @classmethod
    def from_total_line(cls, text: str) -> Counts | None:
        """The counts of a run's total line; None for any other line.

        >>> Counts.from_total_line("  total: 4 passed, 1 failed, 2 skipped")
        Counts(passed=4, failed=1, skipped=2)
        >>> Counts.from_total_line("4 passed in 2.01s") is None
        True
        """
        m = TOTAL.match(text.strip())
        return cls(*map(int, m.groups())) if m else None


def junit_counts(junit: Path) -> Counts:
    """The counts of a pytest --junitxml file; none if the file is missing
    (pytest did not get as far as writing it). Errors count as failures."""
    counts = Counts()
    if not junit.exists():
        return counts
    for suite in ET.parse(junit).getroot().iter("testsuite"):
        tests = int(suite.get("tests", 0))
        failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        skipped = int(suite.get("skipped", 0))
        counts += Counts(tests - failed - skipped, failed, skipped)
    return counts


def junit_by_file(junit: Path, files: list[str]) -> dict[str, str]:
    """Outcome per test file of a pytest --junitxml run: 'ok', 'N failed'
    or 'not run'."""
    counts = {f: [0, 0] for f in files}  # passed-or-skipped, failed
    modules = {f: f[:-3].replace("/", ".") for f in files}
    if junit.exists():
        for case in ET.parse(junit).getroot().iter("testcase"):
            name = case.get("classname") or case.get("name") or ""
            for f, mod in modules.items():
                if name == mod or name.startswith(mod + "."):
                    bad = (case.find("failure") is not None
                           or case.find("error") is not None)
                    counts[f][1 if bad else 0] += 1
    return {
        f: ("ok" if failed == 0 and n else
            f"{failed} failed" if failed else "not run")
        for f, (n, failed) in counts.items()
    }
