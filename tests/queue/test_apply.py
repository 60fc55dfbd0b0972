"""`make apply` and `make export` on a fake release: behaviour and the
refusals that keep work from being lost."""

from __future__ import annotations

import pytest
from conftest import commit_change, git
from pstack.core.errors import UserError
from pstack.core.pin import BasePin
from pstack.core.series import read_series
from pstack.queue.apply import apply
from pstack.queue.export import export


def test_apply_imports_release_and_respects_its_gitignore(stack):
    apply(stack)
    src = stack.src
    assert git(src, "rev-parse", "--abbrev-ref", "HEAD").strip() == "series"
    assert git(src, "rev-parse", "upstream") == git(src, "rev-parse",
                                                    "v0.0.1^{commit}")
    tracked = git(src, "ls-files").split()
    assert "vllm/core.py" in tracked and ".gitignore" in tracked
    # vLLM's .gitignore excludes generated files such as vllm/_version.py,
    # but not the package's sources a general pattern covers.
    assert "vllm/_version.py" not in tracked
    assert "vllm/benchmarks/lib/utils.py" in tracked
    assert git(src, "status", "--porcelain") == ""


def test_import_is_byte_stable_across_checkouts(stack, tmp_path):
    apply(stack)
    first = git(stack.src, "rev-parse", "upstream").strip()
    other = stack.__class__(patches=stack.patches,
                            src=tmp_path / "other-src",
                            cache=stack.cache)
    apply(other)
    assert git(other.src, "rev-parse", "upstream").strip() == first


def test_edit_commit_export_apply_round_trip(stack):
    apply(stack)
    commit_change(stack.src, "vllm/core.py", "line 3\n", "line three\n",
                  "[Core] Spell out 3")
    names = export(stack)
    assert names == ["Core-Spell-out-3.patch"]
    assert read_series(stack) == names
    text = (stack.patches / names[0]).read_text()
    assert text.startswith("From 0000000000000000000000000000000000000000 ")
    assert "Subject: [Core] Spell out 3" in text
    assert "base-commit: " + git(stack.src, "rev-parse",
                                 "v0.0.1^{commit}").strip() in text
    first_bytes = (stack.patches / names[0]).read_bytes()

    tip = apply(stack)
    assert (stack.src /
            "vllm/core.py").read_text().splitlines()[2] == "line three"
    assert apply(stack) == tip, "apply is idempotent down to commit ids"
    export(stack)
    assert (stack.patches /
            names[0]).read_bytes() == first_bytes, "export is byte-stable"


def test_base_imported_by_other_rules_is_imported_again(stack):
    """A vllm-src whose base tag an earlier importer made (one that left out
    files upstream tracks) gets the series' base-commit back."""
    apply(stack)
    commit_change(stack.src, "vllm/core.py", "line 3\n", "line three\n",
                  "[Core] Spell out 3")
    export(stack)
    base = git(stack.src, "rev-parse", "v0.0.1^{commit}").strip()
    # The same release without vllm/benchmarks/lib/, tagged in its place.
    git(stack.src, "rm", "-q", "-r", "--cached", "vllm/benchmarks/lib")
    old_tree = git(stack.src, "write-tree").strip()
    git(stack.src, "reset", "-q", "--hard")
    old_import = git(stack.src, "-c", "user.name=t", "-c", "user.email=t@t",
                     "commit-tree", old_tree, "-m", "old import").strip()
    git(stack.src, "tag", "-f", "v0.0.1", old_import)

    apply(stack)
    assert git(stack.src, "rev-parse", "v0.0.1^{commit}").strip() == base
    assert git(stack.src, "rev-parse", "series~1").strip() == base
    assert (stack.src / "vllm/benchmarks/lib/utils.py").exists()


def test_series_exported_on_another_import_is_refused(stack):
    apply(stack)
    commit_change(stack.src, "vllm/core.py", "line 3\n", "line three\n",
                  "[Core] Spell out 3")
    [name] = export(stack)
    patch = stack.patches / name
    base = git(stack.src, "rev-parse", "v0.0.1^{commit}").strip()
    patch.write_text(patch.read_text().replace(base, "1" * 40))
    with pytest.raises(UserError, match="exported on 111111111111"):
        apply(stack)


def test_export_drops_patches_no_longer_in_series(stack):
    apply(stack)
    commit_change(stack.src, "vllm/core.py", "line 3\n", "line three\n",
                  "[Core] One")
    commit_change(stack.src, "vllm/core.py", "line 9\n", "line nine\n",
                  "[Core] Two")
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
    commit_change(stack.src, "vllm/core.py", "line 3\n", "line three\n",
                  "[Core] Unsaved")
    with pytest.raises(UserError,
                       match=r"not exported.*\[Core\] Unsaved") as err:
        apply(stack)
    assert "make export" in err.value.hint
    tip = git(stack.src, "rev-parse", "series").strip()
    apply(stack, force=True)
    backups = git(stack.src, "branch", "--list", "backup/*",
                  "--format=%(objectname)").split()
    assert backups == [
        tip
    ], "forced apply keeps the discarded commits on a backup branch"
    assert "line three" not in (stack.src / "vllm/core.py").read_text()


def test_apply_after_export_is_allowed(stack):
    apply(stack)
    commit_change(stack.src, "vllm/core.py", "line 3\n", "line three\n",
                  "[Core] Saved")
    export(stack)
    apply(stack)  # nothing would be lost: the commit is in patches/
    assert "line three" in (stack.src / "vllm/core.py").read_text()


def test_patch_that_does_not_apply_is_named_with_its_files(stack):
    apply(stack)
    commit_change(stack.src, "vllm/core.py", "line 3\n", "line A\n",
                  "[Core] Patch A")
    export(stack)
    patch_a = (stack.patches / "Core-Patch-A.patch").read_bytes()
    git(stack.src, "reset", "-q", "--hard", "v0.0.1")
    commit_change(stack.src, "vllm/core.py", "line 3\n", "line B\n",
                  "[Core] Patch B")
    export(stack)
    (stack.patches / "Core-Patch-A.patch").write_bytes(patch_a)
    git(stack.src, "reset", "-q", "--hard", "v0.0.1")
    (stack.patches /
     "series").write_text("Core-Patch-A.patch\nCore-Patch-B.patch\n")
    # Both patches change the same line differently: B conflicts on top of A.
    with pytest.raises(UserError,
                       match=r"patch 2/2 Core-Patch-B.patch does not apply; "
                       r"conflicting files: vllm/core.py") as err:
        apply(stack, force=True)
    assert "am --continue" in err.value.hint and "am --abort" in err.value.hint
    # The tree is left for a person to resolve: A applied, B in progress
    # with markers.
    assert "<<<<<<<" in (stack.src / "vllm/core.py").read_text()
    with pytest.raises(UserError, match="git am is in progress"):
        apply(stack)
    git(stack.src, "am", "--abort")
    (stack.patches / "series").write_text("Core-Patch-A.patch\n")
    apply(stack)
    assert "line A" in (stack.src / "vllm/core.py").read_text()


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
