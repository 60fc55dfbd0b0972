"""`make test`: the project's tests, then the vLLM test files the series touches.

Both run under the project venv with the offline switches set. Then
check-bisect checks every prefix of the series (see check_bisect.py), reusing
the tip run for test files a prefix shares with the tip; each prefix counts as
one test. The final line sums it all up ("N passed, N failed, N skipped").
PSTACK_NO_BISECT=1 leaves check-bisect out.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from .common import REPO, BasePin, Paths, git, progress
from .srctree import SERIES

DESELECT_FILE = REPO / "ci" / "vllm-tests-deselect.txt"

OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
    # The CPU KV cache is sized in GiB; tests need little.
    "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),
}


def test_env() -> dict[str, str]:
    """Offline switches, local models, and the hub stand-ins for vLLM's tests."""
    from .hub_standins import write_standins
    from .tiny_models import generate
    return {
        **OFFLINE_ENV,
        # vLLM's own unit tests name hub repos only to read their configs.
        "HF_HUB_CACHE": str(write_standins()),
        # Engine tests in the series default to an upstream model and take a
        # local one from here.
        "VLLM_TEST_TINY_LLAMA": str(generate("tiny-llama")),
        "VLLM_TEST_TINY_LLAMA_GQA": str(generate("tiny-llama-gqa")),
    }


def deselected() -> list[str]:
    """Node ids of vLLM tests that cannot run on this kind of machine (with why)."""
    ids = []
    for line in DESELECT_FILE.read_text().splitlines():
        node = line.split("#", 1)[0].strip()
        if node:
            ids.append(node)
    return ids


def touched_vllm_tests(paths: Paths) -> list[str]:
    """Test files under vllm-src/tests that the series adds or modifies."""
    pin = BasePin.load(paths.base_file)
    out = git(paths.src, "diff", "--name-only", "--diff-filter=AM", pin.tag, SERIES,
              "--", "tests/")
    return [p for p in out.split() if Path(p).name.startswith("test_") and p.endswith(".py")]


def _pytest(args: list[str], cwd: Path, junit: Path, env: dict[str, str]) -> int:
    cmd = [sys.executable, "-m", "pytest", f"--junitxml={junit}", *args]
    progress(" ".join(cmd[2:]) + f"   (in {cwd})")
    return subprocess.run(cmd, cwd=cwd, env={**os.environ, **env}).returncode


def _counts(junit: Path) -> dict[str, int]:
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    if not junit.exists():
        return counts
    for suite in ET.parse(junit).getroot().iter("testsuite"):
        tests = int(suite.get("tests", 0))
        failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        skipped = int(suite.get("skipped", 0))
        counts["failed"] += failed
        counts["skipped"] += skipped
        counts["passed"] += tests - failed - skipped
    return counts


def _bisect(paths: Paths, tip_results: dict[str, str]) -> dict[str, int]:
    """check-bisect over the series, reusing the tip run above; counts per prefix."""
    from .check_bisect import check_bisect, print_report
    from .common import UserError
    progress("check-bisect: every prefix of the series compiles, lints and passes its "
             "tests (files identical at the tip: the run above)")
    start = time.monotonic()
    try:
        results = check_bisect(paths, tip_results=tip_results)
    except UserError as e:
        print(f"error: check-bisect: {e}")
        return {"passed": 0, "failed": 1, "skipped": 0}
    print_report(results)
    bad = [r for r in results if not r.ok]
    print(f"check-bisect: {len(results) - len(bad)} of {len(results)} prefixes pass "
          f"({time.monotonic() - start:.0f}s)")
    return {"passed": len(results) - len(bad), "failed": len(bad), "skipped": 0}


def main(argv: list[str]) -> int:
    paths = Paths.default()
    env = test_env()
    total = {"passed": 0, "failed": 0, "skipped": 0}
    rcs = []
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "project.xml"
        rcs.append(_pytest(["tests", *argv], REPO, junit, env))
        for k, v in _counts(junit).items():
            total[k] += v
        progress(f"project tests done ({time.monotonic() - start:.0f}s)")
        vllm_tests = touched_vllm_tests(paths)
        tip_results: dict[str, str] = {}
        if vllm_tests and not argv:
            from .check_bisect import junit_by_file
            junit = Path(tmp) / "vllm.xml"
            skip = [f"--deselect={node}" for node in deselected()]
            rcs.append(_pytest(["-p", "no:cacheprovider", *skip, *vllm_tests],
                               paths.src, junit, env))
            for k, v in _counts(junit).items():
                total[k] += v
            tip_results = junit_by_file(junit, vllm_tests)
            progress(f"vLLM tests at the tip done ({time.monotonic() - start:.0f}s)")
        # A filtered run (ARGS=...) is for the project's tests only.
        if not argv and os.environ.get("PSTACK_NO_BISECT") != "1":
            for k, v in _bisect(paths, tip_results).items():
                total[k] += v
    # pytest's 5 means "no tests collected": only acceptable for a filtered run.
    failed = any(rc not in (0, 5) for rc in rcs) or total["passed"] == 0 or total["failed"]
    print(f"make test took {time.monotonic() - start:.0f}s")
    print(f"total: {total['passed']} passed, {total['failed']} failed, "
          f"{total['skipped']} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
