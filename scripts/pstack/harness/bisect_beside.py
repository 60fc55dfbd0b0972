"""check-bisect beside a line's tip tests, in `make test`.

A line's prefixes do not need its tip's results until the end: only the
outcome of the test files they share with the tip comes from there
(check_bisect.settle_at_tip). So `make test` checks them in a process of
their own while the tip's tests and the lm-eval gate run, and settles them
once those end. The part that takes longest (the line users run, whose
engine tests are the most) then ends with its tip tests instead of 7
minutes after them: once the other parts end, its tip tests alone leave a
core idle (docs/testing.md). The process waits for its turn with the
other lines' check-bisect (line_parts.one_bisect_at_a_time), and writes
its output to out/<version>/check-bisect.log, shown when it is settled.

    python -m pstack.harness.bisect_beside AT_TIP_JSON RESULTS_JSON

checks the prefixes of the line PSTACK_LINE names, leaving the test files
listed in AT_TIP_JSON (those make test runs at the tip) pending where they
are the same at the tip, and writes the results to RESULTS_JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ..core.check_results import PatchResult
from ..core.errors import UserError, exit_with_status, progress
from ..core.line import REPO, Line
from .check_bisect import check_prefixes, record, settle_at_tip
from .line_parts import one_bisect_at_a_time, pstack_env


@dataclass
class PrefixChecks:
    """A line's prefixes, being checked in a process of their own."""

    line: Line
    proc: subprocess.Popen
    log: Path
    results: Path
    # How long the checks took, from their own start (not counting their
    # wait for their turn): known once settled.
    seconds: float = 0.0


def start(line: Line, at_tip: list[str]) -> PrefixChecks:
    """Start checking the prefixes of `line`; `at_tip`: the test files make
    test runs at its tip."""
    line.out.mkdir(parents=True, exist_ok=True)
    at_tip_file = line.out / "check-bisect-at-tip.json"
    at_tip_file.write_text(json.dumps(sorted(at_tip)))
    results = line.out / "check-bisect-prefixes.json"
    results.unlink(missing_ok=True)
    log = line.out / "check-bisect.log"
    progress(f"check-bisect of line {line.version}: beside its tip tests, "
             f"output in {log} (shown when the tip tests end)")
    with log.open("w") as kept:
        # In this process's group: stopping the part stops it.
        proc = subprocess.Popen([
            sys.executable, "-m", "pstack.harness.bisect_beside",
            str(at_tip_file),
            str(results)
        ],
                                cwd=REPO,
                                env=pstack_env(line.version),
                                stdout=kept,
                                stderr=subprocess.STDOUT)
    return PrefixChecks(line, proc, log, results)


def settle(checks: PrefixChecks, tip: dict[str, str]) -> list[PatchResult]:
    """Wait for the prefixes' checks, show their output, fill in the
    outcomes at the tip and record them."""
    returncode = checks.proc.wait()
    progress(f"check-bisect of line {checks.line.version}: every prefix "
             "compiles, lints and passes its tests (files identical at the "
             f"tip: the run above); its output, from {checks.log}:")
    print(checks.log.read_text(errors="replace").rstrip(), flush=True)
    if returncode != 0 or not checks.results.exists():
        raise UserError(
            f"checking the prefixes stopped (exit status {returncode})",
            f"its output is above, and in {checks.log}")
    data = json.loads(checks.results.read_text())
    checks.seconds = data["seconds"]
    results = [PatchResult.from_dict(r) for r in data["results"]]
    settle_at_tip(results, tip)
    record(results, checks.line.check_results)
    return results


def main(at_tip_file: Path, results_file: Path) -> int:
    layout = Line.default()
    at_tip = set(json.loads(at_tip_file.read_text()))
    assert layout.root is not None
    with one_bisect_at_a_time(layout.root):
        start = time.monotonic()
        results = check_prefixes(layout, at_tip=at_tip)
    results_file.write_text(
        json.dumps(
            {
                "seconds": time.monotonic() - start,
                "results": [asdict(r) for r in results]
            },
            indent=1))
    return 0


if __name__ == "__main__":
    exit_with_status(lambda: main(Path(sys.argv[1]), Path(sys.argv[2])))
