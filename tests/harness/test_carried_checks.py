"""`make test` on a line without a CPU runtime: its series is checked
(applies, re-exports, upstream-shaped, linted at its tip), each check one
test, and nothing is run."""

from __future__ import annotations

from conftest import AUTHOR, commit_project, git
from pstack.core.lint import linters_for
from pstack.harness.carried_checks import check_series_and_lint
from pstack.harness.junit import Counts
from pstack.queue.apply import apply
from pstack.queue.export import export

TIDY = '"""A module the series adds."""\n\nVALUE = 1\n'
# Unused import, and not formatted as any of the linters would.
UNTIDY = 'import os\nVALUE   =   1\n'


def add_module(stack, text: str) -> None:
    """A patch adding vllm/added.py with `text`, exported and committed."""
    apply(stack)
    (stack.src / "vllm" / "added.py").write_text(text)
    git(stack.src, "add", "vllm/added.py")
    git(
        stack.src, "-c", "user.name=Ada Lovelace", "-c",
        "user.email=ada@example.com", "commit", "-q", "--author", AUTHOR, "-m",
        "[Core] Add a module\n\nWhy: the test needs one.\n\n"
        f"Upstream-Status: Pending\nSigned-off-by: {AUTHOR}\n")
    export(stack)
    commit_project(stack)


def test_a_tidy_carried_series_passes_every_check(stack, capsys):
    add_module(stack, TIDY)
    counts = check_series_and_lint(stack)
    linters = len(linters_for(stack.src))
    assert counts == Counts(passed=1 + linters)
    assert "check-series: 1 patches apply" in capsys.readouterr().out


def test_an_untidy_file_of_the_series_fails_the_linters(stack):
    add_module(stack, UNTIDY)
    counts = check_series_and_lint(stack)
    assert counts.failed >= 1 and counts.passed >= 1  # check-series passes


def test_a_series_that_does_not_re_export_fails_check_series(stack, capsys):
    add_module(stack, TIDY)
    patch = next(stack.patches.glob("*.patch"))
    patch.write_text(patch.read_text().replace("Why: the test", "Why: a"))
    commit_project(stack)
    counts = check_series_and_lint(stack)
    assert counts.failed == 1
    assert "error: check-series" in capsys.readouterr().out
