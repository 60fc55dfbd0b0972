"""apply / export / check-series on a fake release: behaviour and failure cases."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import REPO, commit_change, git

from pstack.check_series import check_series, lint_patch
from pstack.common import BasePin, UserError
from pstack.srctree import apply, export, read_series


def commit_project(paths) -> None:
    project = paths.patches.parent
    git(project, "add", "-A")
    git(project, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "x")


def test_apply_imports_release_and_respects_its_gitignore(stack):
    apply(stack)
    src = stack.src
    assert git(src, "rev-parse", "--abbrev-ref", "HEAD").strip() == "series"
    assert git(src, "rev-parse", "upstream") == git(src, "rev-parse", "v0.0.1^{commit}")
    tracked = git(src, "ls-files").split()
    assert "vllm/core.py" in tracked and ".gitignore" in tracked
    # vLLM's .gitignore excludes generated files such as vllm/_version.py.
    assert "vllm/_version.py" not in tracked
    assert git(src, "status", "--porcelain") == ""


def test_import_is_byte_stable_across_checkouts(stack, tmp_path):
    apply(stack)
    first = git(stack.src, "rev-parse", "upstream").strip()
    other = stack.__class__(patches=stack.patches, src=tmp_path / "other-src",
                            cache=stack.cache)
    apply(other)
    assert git(other.src, "rev-parse", "upstream").strip() == first


def test_edit_commit_export_apply_round_trip(stack):
    apply(stack)
    commit_change(stack.src, "vllm/core.py", "line 3\n", "line three\n", "[Core] Spell out 3")
    names = export(stack)
    assert names == ["Core-Spell-out-3.patch"]
    assert read_series(stack) == names
    text = (stack.patches / names[0]).read_text()
    assert text.startswith("From 0000000000000000000000000000000000000000 ")
    assert "Subject: [Core] Spell out 3" in text
    assert "base-commit: " + git(stack.src, "rev-parse", "v0.0.1^{commit}").strip() in text
    first_bytes = (stack.patches / names[0]).read_bytes()

    tip = apply(stack)
    assert (stack.src / "vllm/core.py").read_text().splitlines()[2] == "line three"
    assert apply(stack) == tip, "apply is idempotent down to commit ids"
    export(stack)
    assert (stack.patches / names[0]).read_bytes() == first_bytes, "export is byte-stable"


def test_export_drops_patches_no_longer_in_series(stack):
    apply(stack)
    commit_change(stack.src, "vllm/core.py", "line 3\n", "line three\n", "[Core] One")
    commit_change(stack.src, "vllm/core.py", "line 9\n", "line nine\n", "[Core] Two")
    assert export(stack) == ["Core-One.patch", "Core-Two.patch"]
    git(stack.src, "reset", "-q", "--hard", "HEAD~1")
    assert export(stack) == ["Core-One.patch"]
    assert not (stack.patches / "Core-Two.patch").exists()


def test_apply_refuses_uncommitted_changes_and_keeps_them(stack):
    apply(stack)
    edited = stack.src / "vllm/core.py"
    edited.write_text("my unsaved work\n")
    with pytest.raises(UserError, match="uncommitted changes.*vllm/core.py"):
        apply(stack)
    assert edited.read_text() == "my unsaved work\n"


def test_apply_refuses_untracked_files(stack):
    apply(stack)
    (stack.src / "vllm/new_module.py").write_text("x = 1\n")
    with pytest.raises(UserError, match="uncommitted changes.*new_module.py"):
        apply(stack)


def test_apply_refuses_unexported_commits_unless_forced(stack):
    apply(stack)
    commit_change(stack.src, "vllm/core.py", "line 3\n", "line three\n", "[Core] Unsaved")
    with pytest.raises(UserError, match=r"not exported.*\[Core\] Unsaved") as err:
        apply(stack)
    assert "make export" in err.value.hint
    tip = git(stack.src, "rev-parse", "series").strip()
    apply(stack, force=True)
    backups = git(stack.src, "branch", "--list", "backup/*", "--format=%(objectname)").split()
    assert backups == [tip], "forced apply keeps the discarded commits on a backup branch"
    assert "line three" not in (stack.src / "vllm/core.py").read_text()


def test_apply_after_export_is_allowed(stack):
    apply(stack)
    commit_change(stack.src, "vllm/core.py", "line 3\n", "line three\n", "[Core] Saved")
    export(stack)
    apply(stack)  # nothing would be lost: the commit is in patches/
    assert "line three" in (stack.src / "vllm/core.py").read_text()


def test_patch_that_does_not_apply_is_named_with_its_files(stack):
    apply(stack)
    commit_change(stack.src, "vllm/core.py", "line 3\n", "line A\n", "[Core] Patch A")
    export(stack)
    patch_a = (stack.patches / "Core-Patch-A.patch").read_bytes()
    git(stack.src, "reset", "-q", "--hard", "v0.0.1")
    commit_change(stack.src, "vllm/core.py", "line 3\n", "line B\n", "[Core] Patch B")
    export(stack)
    (stack.patches / "Core-Patch-A.patch").write_bytes(patch_a)
    git(stack.src, "reset", "-q", "--hard", "v0.0.1")
    (stack.patches / "series").write_text("Core-Patch-A.patch\nCore-Patch-B.patch\n")
    # Both patches change the same line differently: B conflicts on top of A.
    with pytest.raises(UserError, match=r"patch 2/2 Core-Patch-B.patch does not apply; "
                                        r"conflicting files: vllm/core.py") as err:
        apply(stack, force=True)
    assert "am --continue" in err.value.hint and "am --abort" in err.value.hint
    # The tree is left for a person to resolve: A applied, B in progress with markers.
    assert "<<<<<<<" in (stack.src / "vllm/core.py").read_text()
    with pytest.raises(UserError, match="git am is in progress"):
        apply(stack)
    git(stack.src, "am", "--abort")
    (stack.patches / "series").write_text("Core-Patch-A.patch\n")
    apply(stack)
    assert "line A" in (stack.src / "vllm/core.py").read_text()


def test_check_series_passes_on_exported_committed_series(stack):
    apply(stack)
    commit_change(stack.src, "vllm/core.py", "line 3\n", "line three\n", "[Core] Good")
    export(stack)
    commit_project(stack)
    check_series(stack)


def test_check_series_reports_uncommitted_patch_files(stack):
    apply(stack)
    commit_change(stack.src, "vllm/core.py", "line 3\n", "line three\n", "[Core] Good")
    export(stack)
    with pytest.raises(UserError, match="uncommitted changes: .*Core-Good.patch"):
        check_series(stack)


def test_check_series_detects_hand_edited_patch(stack):
    apply(stack)
    commit_change(stack.src, "vllm/core.py", "line 3\n", "line three\n", "[Core] Good")
    export(stack)
    patch = stack.patches / "Core-Good.patch"
    # An edit `git am` accepts but `make export` would not write (a stale diffstat).
    patch.write_text(patch.read_text().replace("1 file changed", "2 files changed", 1))
    commit_project(stack)
    with pytest.raises(UserError, match="apply \\+ export changed Core-Good.patch"):
        check_series(stack)


@pytest.mark.parametrize("kwargs, problem", [
    (dict(signoff=False), "no Signed-off-by"),
    (dict(status=None), "exactly one Upstream-Status"),
    (dict(status="Maybe"), "not in the vocabulary"),
    (dict(body=""), "no body"),
])
def test_lint_names_what_is_missing(stack, kwargs, problem):
    apply(stack)
    commit_change(stack.src, "vllm/core.py", "line 3\n", "x\n", "[Core] Lint me", **kwargs)
    names = export(stack)
    assert any(problem in p for p in lint_patch(stack.patches / names[0]))
    commit_project(stack)
    with pytest.raises(UserError, match=f"Core-Lint-me.patch: .*{problem}"):
        check_series(stack)


def test_lint_requires_tagged_subject(stack):
    apply(stack)
    commit_change(stack.src, "vllm/core.py", "line 3\n", "x\n", "Fix things")
    names = export(stack)
    assert any("[Tag] prefix" in p for p in lint_patch(stack.patches / names[0]))
    assert lint_patch(stack.patches / names[0]) == [
        p for p in lint_patch(stack.patches / names[0]) if "prefix" in p]


def test_wrong_sdist_hash_is_refused_and_file_set_aside(stack):
    pin = BasePin.load(stack.base_file)
    BasePin(**{**pin.__dict__, "sdist_sha256": "f" * 64}).dump(stack.base_file)
    with pytest.raises(UserError, match="does not match the pin"):
        apply(stack)
    assert (stack.cache / "dist" / (pin.sdist + ".bad")).exists()
    assert not stack.src.exists() or not (stack.src / ".git").exists()


def test_missing_pin_and_series_are_clear_errors(stack):
    (stack.patches / "series").write_text("No-such.patch\n")
    with pytest.raises(UserError, match="No-such.patch does not exist"):
        apply(stack)
    stack.base_file.unlink()
    with pytest.raises(UserError, match="base pin .* is missing"):
        apply(stack)


def test_src_that_is_not_a_repo_is_not_touched(stack):
    stack.src.mkdir()
    (stack.src / "precious.txt").write_text("keep\n")
    with pytest.raises(UserError, match="not a git repository"):
        apply(stack)
    assert (stack.src / "precious.txt").read_text() == "keep\n"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pstack", *args], cwd=REPO, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO / "scripts")},
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_cli_reports_one_line_cause_and_next_step(stack):
    assert _cli("apply").returncode == 0
    (stack.src / "vllm/core.py").write_text("dirty\n")
    proc = _cli("apply")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("error: ") and "uncommitted changes" in lines[0]
    assert lines[1].startswith("  next: ")
    assert "Traceback" not in proc.stderr


# ---------------------------------------------------------------- make rebase

def _series_abc(stack) -> None:
    """Three patches on 0.0.1, exported and committed: A, B and C edit core.py."""
    apply(stack)
    commit_change(stack.src, "vllm/core.py", "line 3\n", "line three\n", "[Core] A")
    commit_change(stack.src, "vllm/core.py", "line 9\n", "line nine\n", "[Core] B")
    commit_change(stack.src, "vllm/core.py", "line 15\n", "line fifteen\n", "[Core] C")
    export(stack)
    commit_project(stack)


def _release(stack, monkeypatch, version: str, edits: dict[str, str]) -> BasePin:
    """A fake newer release in the download cache, found by the (stubbed) index."""
    import hashlib

    import pstack.rebase
    from conftest import FAKE_FILES, make_release_tarball
    core = FAKE_FILES["vllm/core.py"]
    for old, new in edits.items():
        core = core.replace(old, new)
    files = {**FAKE_FILES, "vllm/core.py": core, "vllm/new_in_release.py": "x = 2\n"}
    tarball = make_release_tarball(stack.cache / "dist", version, files)
    pin = BasePin(version=version, sdist=tarball.name,
                  sdist_sha256=hashlib.sha256(tarball.read_bytes()).hexdigest(),
                  wheel=f"vllm-{version}-py3-none-any.whl", wheel_sha256="1" * 64)
    monkeypatch.setattr(pstack.rebase, "find_release", lambda v, like: pin)
    return pin


# Upstream took A as it is and changed B's line its own way.
UPSTREAMED_A_CONFLICTS_B = {"line 3\n": "line three\n", "line 9\n": "line NINE\n"}


def test_rebase_drops_upstreamed_patch_and_stops_at_conflict_then_aborts(
        stack, monkeypatch, capsys):
    from pstack.rebase import abort, rebase
    _series_abc(stack)
    _release(stack, monkeypatch, "0.0.2", UPSTREAMED_A_CONFLICTS_B)
    old_tip = git(stack.src, "rev-parse", "series").strip()
    old_upstream = git(stack.src, "rev-parse", "upstream").strip()
    pin_before = stack.base_file.read_bytes()
    with pytest.raises(UserError, match=r"stopped at patch 2/3 Core-B.patch \(\[Core\] B\); "
                                        r"conflicting files: vllm/core.py") as err:
        rebase(stack, "0.0.2")
    assert "make rebase TO=0.0.2" in err.value.hint
    assert "rebase --skip" in err.value.hint and "make rebase-abort" in err.value.hint
    assert "patch 1/3 Core-A.patch: already upstream, dropped" in capsys.readouterr().out
    # Recoverable: the rebase waits in vllm-src, and other commands say how to go on.
    assert "<<<<<<<" in (stack.src / "vllm/core.py").read_text()
    assert stack.base_file.read_bytes() == pin_before, "the pin moves only at the end"
    with pytest.raises(UserError, match="git rebase is in progress") as err:
        apply(stack)
    assert "make rebase" in err.value.hint
    abort(stack)
    assert git(stack.src, "rev-parse", "series").strip() == old_tip
    assert git(stack.src, "rev-parse", "upstream").strip() == old_upstream
    assert git(stack.src, "tag", "--list", "v0.0.2").strip() == ""
    assert git(stack.src, "status", "--porcelain") == ""
    assert stack.base_file.read_bytes() == pin_before
    apply(stack)  # everything is as before: nothing unexported, nothing in progress


def test_rebase_continues_after_resolution_and_reports_the_drop(stack, monkeypatch, capsys):
    from pstack.rebase import rebase
    _series_abc(stack)
    _release(stack, monkeypatch, "0.0.2", UPSTREAMED_A_CONFLICTS_B)
    with pytest.raises(UserError, match="stopped at patch 2/3"):
        rebase(stack, "0.0.2")
    core = stack.src / "vllm/core.py"
    text = core.read_text()
    with pytest.raises(UserError, match="stopped at patch 2/3"):
        rebase(stack, None)  # not resolved yet: says so again, changes nothing
    assert core.read_text() == text
    core.write_text(re.sub(r"<<<<<<<.*?>>>>>>> [^\n]*\n", "line nine\n", text, flags=re.S))
    git(stack.src, "add", "vllm/core.py")
    result = rebase(stack, "0.0.2")
    assert result.dropped == ["[Core] A"] and result.kept == ["[Core] B", "[Core] C"]
    assert "dropped (already upstream): [Core] A" in capsys.readouterr().out
    assert read_series(stack) == ["Core-B.patch", "Core-C.patch"]
    assert not (stack.patches / "Core-A.patch").exists()
    assert BasePin.load(stack.base_file).version == "0.0.2"
    range_diff = (stack.patches.parent / "docs" / "rebase-0.0.2.range-diff").read_text()
    assert re.search(r"1: +[0-9a-f]+ < +-: +-+ \[Core\] A", range_diff)
    assert re.search(r"2: +[0-9a-f]+ ! +1: +[0-9a-f]+ \[Core\] B", range_diff)


def test_clean_rebase_updates_pin_exports_and_is_reproducible(stack, monkeypatch, tmp_path):
    from pstack.rebase import rebase
    _series_abc(stack)
    new = _release(stack, monkeypatch, "0.0.2", {"line 20\n": "line twenty\n"})
    old = BasePin.load(stack.base_file)
    result = rebase(stack, "0.0.2")
    assert result.dropped == [] and len(result.kept) == 3
    pin = BasePin.load(stack.base_file)
    assert (pin.version, pin.sdist_sha256, pin.wheel) == ("0.0.2", new.sdist_sha256, new.wheel)
    assert pin.previous == (old.release,)
    # The new release is the next commit on upstream, and the patches name it as base.
    v2 = git(stack.src, "rev-parse", "v0.0.2^{commit}").strip()
    assert git(stack.src, "rev-parse", "upstream").strip() == v2
    assert git(stack.src, "rev-parse", "v0.0.2^").strip() == git(
        stack.src, "rev-parse", "v0.0.1^{commit}").strip()
    assert f"base-commit: {v2}" in (stack.patches / "Core-A.patch").read_text()
    range_diff = (stack.patches.parent / "docs" / "rebase-0.0.2.range-diff").read_text()
    assert len(re.findall(r"^\d+: +[0-9a-f]+ = +\d+: +[0-9a-f]+ ", range_diff, re.M)) == 3
    # A fresh checkout imports the same chain: same ids, and check-series holds.
    commit_project(stack)
    other = stack.__class__(patches=stack.patches, src=tmp_path / "fresh-src",
                            cache=stack.cache)
    apply(other)
    assert git(other.src, "rev-parse", "v0.0.2^{commit}").strip() == v2
    check_series(stack)


def test_rebase_refuses_unexported_work_before_importing(stack, monkeypatch):
    from pstack.rebase import rebase
    _series_abc(stack)
    _release(stack, monkeypatch, "0.0.2", {})
    commit_change(stack.src, "vllm/core.py", "line 4\n", "line four\n", "[Core] Unsaved")
    with pytest.raises(UserError, match="not exported"):
        rebase(stack, "0.0.2")
    assert git(stack.src, "tag", "--list", "v0.0.2").strip() == ""
    with pytest.raises(UserError, match="already based on vLLM 0.0.1"):
        rebase(stack, "0.0.1")


def test_rebase_report_goes_past_conflicts_in_a_scratch_tree(stack, monkeypatch, tmp_path):
    from pstack.rebase import report
    apply(stack)
    commit_change(stack.src, "vllm/core.py", "line 3\n", "line three\n", "[Core] A")
    commit_change(stack.src, "vllm/core.py", "line 9\n", "line nine\n", "[Core] B")
    commit_change(stack.src, "vllm/core.py", "line nine\n", "line 9 again\n", "[Core] C")
    commit_change(stack.src, "vllm/core.py", "line 15\n", "line fifteen\n", "[Core] D")
    export(stack)
    shutil.rmtree(stack.src)  # the report never needs (nor touches) vllm-src
    _release(stack, monkeypatch, "0.0.2", UPSTREAMED_A_CONFLICTS_B)
    docs = tmp_path / "docs"
    (docs).mkdir()
    (docs / "rebase-0.0.2.md").write_text("# Notes by hand\n\nKept.\n")
    doc = report(stack, "0.0.2", tmp_path / "scratch", docs)
    text = doc.read_text()
    assert text.startswith("# Notes by hand\n\nKept.\n")
    assert "| 1 | [Core] A | dropped: already upstream |" in text
    assert "| 2 | [Core] B | **conflict**: `vllm/core.py` |" in text
    # C builds on B: it applies once B's conflict is resolved to the patch's side.
    assert "| 3 | [Core] C | applies cleanly (after the conflicts" in text
    assert "| `vllm/core.py` | line 9 | +2 -2 |" in text
    assert "Core-D" not in text and "[Core] D | applies cleanly" in text
    details = (docs / "rebase-0.0.2.conflicts.txt").read_text()
    assert "=== patch 2/4: [Core] B" in details and "line NINE" in details
    # The range-diff is written too, flagged as showing unreviewed
    # resolutions of the conflicting patch.
    range_diff = (docs / "rebase-0.0.2.range-diff").read_text()
    assert range_diff.startswith("# The conflicting hunks of patches 2 were resolved")
    assert re.search(r"\[Core\] B", range_diff)
    assert not stack.src.exists()
    # Regenerating replaces the generated part only.
    report(stack, "0.0.2", tmp_path / "scratch", docs)
    assert doc.read_text() == text


# ---------------------------------------------------------------- make pr

def _series_for_pr(stack) -> None:
    apply(stack)
    commit_change(stack.src, "vllm/core.py", "line 3\n", "line three\n", "[Core] A",
                  body="A is needed because of X.\n\nIt does Y.")
    commit_change(stack.src, "vllm/version.py", "0.0.1", "0.0.1+b", "[Misc] B")
    commit_change(stack.src, "tests/test_core.py", "assert True", "assert 1 + 1 == 2",
                  "[Core] C", status="Submitted [https://example.invalid/pull/1]")
    commit_change(stack.src, "vllm/core.py", "line 15\n", "line fifteen\n", "[Core] D")
    export(stack)


def test_pr_writes_title_body_patch_and_branch_with_prerequisites(stack, tmp_path):
    from pstack.pr import pr
    _series_for_pr(stack)
    out = tmp_path / "out"
    folders = pr(stack, ["4", "b"], out, results_file=tmp_path / "none.json")
    assert [f.name for f in folders] == ["04-core-d", "02-misc-b"]
    d = out / "04-core-d"
    assert (d / "title.txt").read_text() == "[Core] D\n"
    body = (d / "body.md").read_text()
    assert "## Purpose\n\nWhy: the test needs a change.\n\nPart of RFC #19854.\n" in body
    assert "Upstream-Status: Pending" in body and "Signed-off-by" not in body.split("---")[0]
    # D changes core.py, as A does: A is its prerequisite; B and C are not.
    assert "- [Core] A (not submitted yet: `make pr N=1`, branch `pr/01-core-a`) " \
           "(also changes `vllm/core.py`)" in body
    assert "[Misc] B" not in body
    assert "vllm/core.py | 2 +-" in body
    assert "## Test Plan" in body and "pre-commit run --files vllm/core.py" in body
    assert "No results recorded" in body
    assert "DCO: ok, signed off by the author Ada Lovelace <ada@example.com>" in body
    log = git(stack.src, "log", "--format=%s", "v0.0.1..pr/04-core-d").split("\n")
    assert log[:2] == ["[Core] D", "[Core] A"] and len(log) == 3  # trailing ""
    patch = (d / "patch").read_text()
    assert "Subject: [Core] D" in patch and "+line fifteen" in patch
    git(stack.src, "checkout", "-q", "--detach", "v0.0.1")
    git(stack.src, "am", "-q", str(out / "02-misc-b" / "patch"))  # applies on the base
    b = (out / "02-misc-b" / "body.md").read_text()
    assert "Nothing: applies directly on vLLM 0.0.1." in b


def test_pr_quotes_recorded_results_and_submitted_dependencies(stack, tmp_path):
    import json

    from pstack.pr import pr
    _series_for_pr(stack)
    commit_change(stack.src, "tests/test_core.py", "1 + 1 == 2", "2 + 2 == 4", "[Core] E")
    export(stack)
    tree = git(stack.src, "rev-parse", "series^{tree}").strip()
    results = tmp_path / "results.json"
    results.write_text(json.dumps([{
        "subject": "[Core] E", "tree": tree, "date": "2025-01-02 03:04:05",
        "checks": {"compile": "ok", "tests": "ok"}, "ran": "1 file(s) here: 1 passed"}]))
    pr(stack, ["5"], tmp_path / "out", results_file=results)
    body = (tmp_path / "out" / "05-core-e" / "body.md").read_text()
    assert "`make check-bisect` on 2025-01-02 03:04:05" in body
    assert "- compile: ok, tests: ok" in body and "1 file(s) here: 1 passed" in body
    assert "- [Core] C (https://example.invalid/pull/1)" in body
    assert "pytest -q tests/test_core.py" in body


def test_pr_detects_missing_or_foreign_sign_off(stack, tmp_path):
    from pstack.pr import pr
    apply(stack)
    commit_change(stack.src, "vllm/core.py", "line 3\n", "x\n", "[Core] Unsigned",
                  signoff=False)
    f = stack.src / "vllm/core.py"
    f.write_text(f.read_text().replace("line 9\n", "y\n"))
    git(stack.src, "-c", "user.name=Ada Lovelace", "-c", "user.email=ada@example.com",
        "commit", "-q", "-a", "-m", "[Core] Foreign\n\nWhy.\n\nUpstream-Status: Pending\n"
        "Signed-off-by: Eve <eve@example.com>\n")
    export(stack)
    with pytest.raises(UserError, match=r"DCO check failed: 1 Core-Unsigned.patch: no "
                                        r"Signed-off-by.*; 2 Core-Foreign.patch: no "
                                        r"Signed-off-by: from the author Ada Lovelace "
                                        r"<ada@example.com> \(signed off by Eve") as err:
        pr(stack, [], tmp_path / "out", results_file=tmp_path / "none.json")
    assert "make pr" in err.value.hint
    body = (tmp_path / "out" / "02-core-foreign" / "body.md").read_text()
    assert "DCO: FAILED: no Signed-off-by: from the author" in body


def test_pr_names_an_unknown_patch(stack, tmp_path):
    from pstack.pr import pr
    _series_for_pr(stack)
    with pytest.raises(UserError, match="no patch 9: the series has 4"):
        pr(stack, ["9"], tmp_path / "out")
    with pytest.raises(UserError, match="'core' matches 3 patches"):
        pr(stack, ["core"], tmp_path / "out")


# ---------------------------------------------------------------- check-bisect

def test_check_bisect_reuses_the_tip_run_only_for_files_identical_there(
        stack, monkeypatch, tmp_path):
    import pstack.check_bisect as cb
    monkeypatch.setattr(cb, "test_env", lambda: {})
    monkeypatch.setattr(cb, "deselected", lambda: [])
    apply(stack)
    commit_change(stack.src, "tests/test_core.py", "assert True", "assert 1 + 1 == 2",
                  "[Core] Test A")
    commit_change(stack.src, "vllm/version.py", "0.0.1", "0.0.1+b", "[Core] B")
    commit_change(stack.src, "tests/test_core.py", "def test_ok", "def test_fine",
                  "[Core] Rename the test")
    export(stack)
    results = tmp_path / "results.json"
    # From make test: the last patch's file is the tip's; the first patch's is not.
    first, _, last = cb.check_bisect(stack, tip_results={"tests/test_core.py": "2 failed"},
                                     results_file=results)
    assert first.ran == "1 file(s) here: 1 passed in " + first.ran.split(" in ")[1]
    assert first.checks["tests"] == "ok"
    assert last.ran == "1 file(s) identical at the tip, run there by make test"
    assert last.checks["tests"] == "tests/test_core.py: 2 failed"
    # Alone, every file runs at its prefix; a passing prefix is then not re-checked.
    runs = cb.check_bisect(stack, results_file=results)
    assert all(r.ok for r in runs) and "here: 1 passed" in runs[2].ran
    again = cb.check_bisect(stack, results_file=results)
    assert again[0].ran.startswith("as recorded on ")
    assert [r.tree for r in again] == [r.tree for r in runs]
    third = cb.check_bisect(stack, results_file=results)
    assert third[0].ran == again[0].ran, "a reused record is kept as it was"


def test_cli_rebase_and_pr_errors_are_one_line_with_next_step(stack):
    for args, message in ((["rebase"], "no rebase under way and no version given"),
                          (["rebase", "--abort"], "no `make rebase` is under way"),
                          (["pr", "9"], "no patch 9: the series has 0")):
        proc = _cli(*args)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert lines[0] == f"error: {message}" and lines[1].startswith("  next: ")
        assert "Traceback" not in proc.stderr


def test_check_bisect_names_the_failing_test_and_does_not_record_it_as_passing(
        stack, monkeypatch, tmp_path):
    import pstack.check_bisect as cb
    monkeypatch.setattr(cb, "test_env", lambda: {})
    monkeypatch.setattr(cb, "deselected", lambda: [])
    apply(stack)
    commit_change(stack.src, "tests/test_core.py", "assert True", "assert 1 == 2",
                  "[Core] Broken test")
    export(stack)
    results = tmp_path / "results.json"
    (r,) = cb.check_bisect(stack, results_file=results)
    assert not r.ok
    assert r.checks["tests"].startswith("1 failed")
    assert "FAILED tests/test_core.py::test_ok" in r.checks["tests"]
    (again,) = cb.check_bisect(stack, results_file=results)
    assert not again.ran.startswith("as recorded"), "failures are checked again"


def test_pr_prerequisites_follow_imports():
    from pstack.pr import Patch, _imported_files, _prerequisites
    diff = ("+from vllm.v1.kv_offload.mediums import GPULoadStoreSpec\n"
            "+from vllm.v1.kv_offload import worker\n"
            "+import vllm.v1.core.sched.output\n"
            " from vllm.config import VllmConfig\n")
    files = _imported_files(diff)
    assert "vllm/v1/kv_offload/mediums.py" in files
    assert "vllm/v1/kv_offload/worker.py" in files  # maybe a submodule
    assert "vllm/v1/core/sched/output.py" in files
    # Context lines are not added imports.
    assert "vllm/config.py" not in files

    def patch(n, files, imports=()):
        return Patch(n, f"{n}.patch", "c", "s", "a", "m", list(files), imports=set(imports))
    patches = [patch(1, ["vllm/v1/core/sched/output.py"]),
               patch(2, ["vllm/v1/kv_offload/mediums.py"]),
               patch(3, ["vllm/other.py"]),
               patch(4, ["vllm/v1/kv_offload/cpu.py"], files)]
    # 4 shares no file with 1 or 2 but imports what they add.
    assert _prerequisites(patches, 4) == [1, 2]
