"""`make check-series`: re-export byte for byte, committed, upstream-shaped."""

from __future__ import annotations

import pytest
from conftest import commit_change, commit_project
from pstack.core.errors import UserError
from pstack.queue.apply import apply
from pstack.queue.check_series import check_series, lint_patch
from pstack.queue.export import export


def test_check_series_passes_on_exported_committed_series(stack):
    apply(stack)
    commit_change(stack.src, "vllm/core.py", "line 3\n", "line three\n",
                  "[Core] Good")
    export(stack)
    commit_project(stack)
    check_series(stack)


def test_check_series_reports_uncommitted_patch_files(stack):
    apply(stack)
    commit_change(stack.src, "vllm/core.py", "line 3\n", "line three\n",
                  "[Core] Good")
    export(stack)
    with pytest.raises(UserError,
                       match="uncommitted changes: .*Core-Good.patch"):
        check_series(stack)


def test_check_series_detects_hand_edited_patch(stack):
    apply(stack)
    commit_change(stack.src, "vllm/core.py", "line 3\n", "line three\n",
                  "[Core] Good")
    export(stack)
    patch = stack.patches / "Core-Good.patch"
    # An edit `git am` accepts but `make export` would not write (a stale
    # diffstat).
    patch.write_text(patch.read_text().replace("1 file changed",
                                               "2 files changed", 1))
    commit_project(stack)
    with pytest.raises(UserError,
                       match="apply \\+ export changed Core-Good.patch"):
        check_series(stack)


@pytest.mark.parametrize("kwargs, problem", [
    (dict(signoff=False), "no Signed-off-by"),
    (dict(status=None), "exactly one Upstream-Status"),
    (dict(status="Maybe"), "not in the vocabulary"),
    (dict(body=""), "no body"),
])
def test_lint_names_what_is_missing(stack, kwargs, problem):
    apply(stack)
    commit_change(stack.src, "vllm/core.py", "line 3\n", "x\n",
                  "[Core] Lint me", **kwargs)
    names = export(stack)
    assert any(problem in p for p in lint_patch(stack.patches / names[0]))
    commit_project(stack)
    with pytest.raises(UserError, match=f"Core-Lint-me.patch: .*{problem}"):
        check_series(stack)


def test_lint_requires_tagged_subject(stack):
    apply(stack)
    commit_change(stack.src, "vllm/core.py", "line 3\n", "x\n", "Fix things")
    names = export(stack)
    assert any("[Tag] prefix" in p
               for p in lint_patch(stack.patches / names[0]))
    assert lint_patch(stack.patches / names[0]) == [
        p for p in lint_patch(stack.patches / names[0]) if "prefix" in p
    ]


def test_check_series_detects_a_stale_series_table(stack):
    apply(stack)
    commit_change(stack.src, "vllm/core.py", "line 3\n", "line three\n",
                  "[Core] Good")
    export(stack)
    readme = stack.patches / "README.md"
    readme.write_text(readme.read_text().replace("[Core] Good", "[Core] Old"))
    # The checkout's own README.md is no part of the series.
    (stack.patches.parent / "README.md").write_text("# The project\n")
    commit_project(stack)
    with pytest.raises(UserError, match="apply \\+ export changed README.md"):
        check_series(stack)
