"""The in-place rebase under `make rebase` and `make rebase-abort`, onto a
fake newer release."""

from __future__ import annotations

import re

import pytest
from conftest import (ABSORBS_A, UPSTREAMED_A_CONFLICTS_B, commit_change,
                      commit_project, git, new_release, series_abc,
                      write_upstream_record)
from pstack.core.errors import UserError
from pstack.core.pin import BasePin
from pstack.core.series import read_series
from pstack.queue.apply import apply
from pstack.queue.check_series import check_series


def _range_diff(stack):
    """Where the tests have the rebase write its range-diff."""
    return stack.patches.parent / "docs" / "reports" / "0.0.2" / "x.range-diff"


def test_rebase_drops_upstreamed_patch_and_stops_at_conflict_then_aborts(
        stack, monkeypatch, capsys):
    from pstack.queue.rebase_in_place import abort, rebase
    series_abc(stack)
    new_release(stack, monkeypatch, "0.0.2", UPSTREAMED_A_CONFLICTS_B)
    old_tip = git(stack.src, "rev-parse", "series").strip()
    old_upstream = git(stack.src, "rev-parse", "upstream").strip()
    pin_before = stack.base_file.read_bytes()
    with pytest.raises(
            UserError,
            match=r"stopped at patch 2/3 Core-B.patch \(\[Core\] B\); "
            r"conflicting files: vllm/core.py") as err:
        rebase(stack, "0.0.2", range_diff=_range_diff(stack))
    assert "make rebase TO=0.0.2" in err.value.hint
    assert "rebase --skip" in err.value.hint
    assert "make rebase-abort" in err.value.hint
    assert ("patch 1/3 Core-A.patch: already upstream, dropped"
            in capsys.readouterr().out)
    # Recoverable: the rebase waits in vllm-src, and other commands say how to
    # go on.
    assert "<<<<<<<" in (stack.src / "vllm/core.py").read_text()
    assert stack.base_file.read_bytes(
    ) == pin_before, "the pin moves only at the end"
    with pytest.raises(UserError, match="git rebase is in progress") as err:
        apply(stack)
    assert "make rebase" in err.value.hint
    abort(stack)
    assert git(stack.src, "rev-parse", "series").strip() == old_tip
    assert git(stack.src, "rev-parse", "upstream").strip() == old_upstream
    assert git(stack.src, "tag", "--list", "v0.0.2").strip() == ""
    assert git(stack.src, "status", "--porcelain") == ""
    assert stack.base_file.read_bytes() == pin_before
    apply(stack
          )  # everything is as before: nothing unexported, nothing in progress


def test_rebase_continues_after_resolution_and_reports_the_drop(
        stack, monkeypatch, capsys):
    from pstack.queue.rebase_in_place import rebase
    series_abc(stack)
    new_release(stack, monkeypatch, "0.0.2", UPSTREAMED_A_CONFLICTS_B)
    with pytest.raises(UserError, match="stopped at patch 2/3"):
        rebase(stack, "0.0.2", range_diff=_range_diff(stack))
    core = stack.src / "vllm/core.py"
    text = core.read_text()
    with pytest.raises(UserError, match="stopped at patch 2/3"):
        # Not resolved yet: says so again, changes nothing.
        rebase(stack, None, range_diff=_range_diff(stack))
    assert core.read_text() == text
    core.write_text(
        re.sub(r"<<<<<<<.*?>>>>>>> [^\n]*\n", "line nine\n", text, flags=re.S))
    git(stack.src, "add", "vllm/core.py")
    result = rebase(stack, "0.0.2", range_diff=_range_diff(stack))
    assert result.dropped == ["[Core] A"
                              ] and result.kept == ["[Core] B", "[Core] C"]
    assert "dropped (already upstream): [Core] A" in capsys.readouterr().out
    assert read_series(stack) == ["Core-B.patch", "Core-C.patch"]
    assert not (stack.patches / "Core-A.patch").exists()
    assert BasePin.load(stack.base_file).version == "0.0.2"
    range_diff = _range_diff(stack).read_text()
    # Hashes of eight digits, whatever the repository's size.
    assert re.search(r"1: +[0-9a-f]{8} < +-: +-{8} \[Core\] A", range_diff)
    assert re.search(r"2: +[0-9a-f]{8} ! +1: +[0-9a-f]{8} \[Core\] B",
                     range_diff)


def test_clean_rebase_updates_pin_exports_and_is_reproducible(
        stack, monkeypatch, tmp_path):
    from pstack.queue.rebase_in_place import rebase
    series_abc(stack)
    new = new_release(stack, monkeypatch, "0.0.2",
                      {"line 20\n": "line twenty\n"})
    old = BasePin.load(stack.base_file)
    result = rebase(stack, "0.0.2", range_diff=_range_diff(stack))
    assert result.dropped == [] and len(result.kept) == 3
    pin = BasePin.load(stack.base_file)
    assert (pin.version, pin.sdist_sha256,
            pin.wheel) == ("0.0.2", new.sdist_sha256, new.wheel)
    assert pin.previous == (old.release, )
    # The new release is the next commit on upstream, and the patches name it
    # as base.
    v2 = git(stack.src, "rev-parse", "v0.0.2^{commit}").strip()
    assert git(stack.src, "rev-parse", "upstream").strip() == v2
    assert git(stack.src, "rev-parse",
               "v0.0.2^").strip() == git(stack.src, "rev-parse",
                                         "v0.0.1^{commit}").strip()
    assert f"base-commit: {v2}" in (stack.patches / "Core-A.patch").read_text()
    range_diff = _range_diff(stack).read_text()
    assert len(
        re.findall(r"^\d+: +[0-9a-f]+ = +\d+: +[0-9a-f]+ ", range_diff,
                   re.M)) == 3
    # A fresh checkout imports the same chain: same ids, and check-series holds.
    commit_project(stack)
    other = stack.__class__(patches=stack.patches,
                            src=tmp_path / "fresh-src",
                            cache=stack.cache)
    apply(other)
    assert git(other.src, "rev-parse", "v0.0.2^{commit}").strip() == v2
    check_series(stack)


def test_rebase_refuses_unexported_work_before_importing(stack, monkeypatch):
    from pstack.queue.rebase_in_place import rebase
    series_abc(stack)
    new_release(stack, monkeypatch, "0.0.2", {})
    commit_change(stack.src, "vllm/core.py", "line 4\n", "line four\n",
                  "[Core] Unsaved")
    with pytest.raises(UserError, match="not exported"):
        rebase(stack, "0.0.2", range_diff=_range_diff(stack))
    assert git(stack.src, "tag", "--list", "v0.0.2").strip() == ""
    with pytest.raises(UserError, match="already based on vLLM 0.0.1"):
        rebase(stack, "0.0.1", range_diff=_range_diff(stack))


def test_rebase_leaves_out_the_patches_a_release_absorbed(
        stack, monkeypatch, capsys):
    from pstack.queue.rebase_in_place import rebase
    series_abc(stack)
    new_release(stack, monkeypatch, "0.0.2", ABSORBS_A)
    # Without the record, upstream's own form of A is a conflict.
    with pytest.raises(UserError, match="stopped at patch 1/3 Core-A.patch"):
        rebase(stack, "0.0.2", range_diff=_range_diff(stack))
    from pstack.queue.rebase_in_place import abort
    abort(stack)
    # A is absorbed; C only partly (one of its two texts is upstream), so it
    # stays; B has no entry.
    write_upstream_record(stack, [("Core-A.patch", ["line 3 (#1)"]),
                                  ("Core-C.patch", ["line 3 (#1)", "gone"])])
    commit_project(stack)
    result = rebase(stack, "0.0.2", range_diff=_range_diff(stack))
    assert result.kept == ["[Core] B", "[Core] C"]
    assert result.absorbed == {
        "[Core] A": "absorbed by vllm-project/vllm#1: `vllm/core.py:3`"
    }
    assert result.dropped == [] and result.skipped == []
    out = capsys.readouterr().out
    assert ("dropped (absorbed by vllm-project/vllm#1: `vllm/core.py:3`): "
            "[Core] A" in out)
    assert "patch 3/3 Core-C.patch: partly absorbed" in out
    assert read_series(stack) == ["Core-B.patch", "Core-C.patch"]
    # The record stays: it says where upstream has what the line left out.
    assert "Core-A.patch" in stack.upstream_record.read_text()
    assert "line 3 (#1)" in (stack.src / "vllm/core.py").read_text()


@pytest.mark.parametrize("record, error", [
    ("[[absorbed]]\npatch = 'A.patch'\n", "needs patch, upstream and"),
    ("[[absorbed]]\npatch = 'A.patch'\nupstream = 'x'\nevidence = []\n",
     "has no evidence"),
    ("[[absorbed]\n", "is not valid TOML"),
])
def test_bad_upstream_record_is_one_clear_error(stack, record, error):
    from pstack.queue.absorbed import read_upstream_entries
    stack.upstream_record.write_text(record)
    with pytest.raises(UserError, match=error):
        read_upstream_entries(stack.upstream_record)
