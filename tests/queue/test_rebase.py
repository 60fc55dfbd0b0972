"""`make rebase TO=<version>`: carrying a line onto a fake newer release as
a line of its own, and replaying the resolutions it records."""

from __future__ import annotations

import re
import shutil

import pytest
from conftest import (UPSTREAMED_A_CONFLICTS_B, commit_change, commit_project,
                      git, new_release, series_abc, write_upstream_record)
from pstack.core.errors import UserError
from pstack.core.line import Line
from pstack.core.pin import BasePin
from pstack.core.series import read_series
from pstack.queue.apply import apply
from pstack.queue.export import export
from pstack.queue.rebase import abort_carry, carry, recorded_source
from pstack.queue.series_table import readme
from pstack.queue.todo import TodoPlan


def _files(directory) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def _carry_resolving_b(stack: Line, subject: str | None = None) -> Line:
    """Carry A, B, C onto 0.0.2 (A upstream, B conflicts), resolving B by
    hand the way only a person knows (and giving it a new subject, if
    given); return the new line."""
    line = stack.line("0.0.2")
    with pytest.raises(UserError, match="stopped at patch 2/3 Core-B.patch"):
        carry(stack, "0.0.2")
    core = line.src / "vllm/core.py"
    core.write_text(
        re.sub(r"<<<<<<<.*?>>>>>>> [^\n]*\n",
               "line nine, as upstream's NINE\n",
               core.read_text(),
               flags=re.S))
    git(line.src, "add", "vllm/core.py")
    if subject is not None:
        git(
            line.src, "-c", "user.name=Ada", "-c",
            "user.email=ada@example.com", "commit", "-q", "-m",
            f"{subject}\n\nWhy: 0.0.2 has its own line nine.\n\n"
            "Signed-off-by: Ada Lovelace <ada@example.com>")
    carry(stack, "0.0.2")
    return line


def test_carry_writes_the_line_and_replays_it_byte_for_byte(
        stack, monkeypatch, capsys):
    series_abc(stack)
    new_release(stack, monkeypatch, "0.0.2", UPSTREAMED_A_CONFLICTS_B)
    carried_line = _files(stack.patches)
    line = _carry_resolving_b(stack)
    # The line carried is as it was; the new one sits next to it.
    assert _files(stack.patches) == carried_line
    assert line.patches == stack.root / "lines" / "0.0.2"
    assert read_series(line) == ["Core-B.patch", "Core-C.patch"]
    assert BasePin.load(line.base_file).version == "0.0.2"
    assert "line nine, as upstream's NINE" in (line.patches /
                                               "Core-B.patch").read_text()
    record = (line.patches / "carried.toml").read_text()
    assert 'patch = "Core-B.patch"\nsource = "Core-B.patch"' in record
    assert (stack.root / "docs/reports/0.0.2/carry.range-diff").exists()
    # Each line's README.md lists its own patches, also when the line is
    # exported after work in its vllm-src.
    export(line)
    assert "patches on vLLM 0.0.2" in readme(line).read_text()
    assert "0.0.2" not in readme(stack).read_text()
    committed = _files(line.patches)
    commit_project(stack)

    # A fresh clone has no vllm-src-0.0.2: carrying again asks nothing and
    # writes the same bytes.
    shutil.rmtree(line.src)
    capsys.readouterr()
    carry(stack, "0.0.2")
    assert _files(line.patches) == committed
    out = capsys.readouterr().out
    assert "replaying the recorded version of 2 patch(es)" in out
    assert "patch 1/3 Core-A.patch: already upstream, dropped" in out
    assert git(line.src, "status", "--porcelain") == ""


def test_a_resolution_that_renames_its_patch_is_recorded_and_replayed(
        stack, monkeypatch):
    series_abc(stack)
    new_release(stack, monkeypatch, "0.0.2", UPSTREAMED_A_CONFLICTS_B)
    line = _carry_resolving_b(stack, subject="[Core] B on 0.0.2's NINE")
    assert read_series(line) == [
        "Core-B-on-0.0.2-s-NINE.patch", "Core-C.patch"
    ]
    record = (line.patches / "carried.toml").read_text()
    assert ('patch = "Core-B-on-0.0.2-s-NINE.patch"\n'
            'source = "Core-B.patch"') in record
    committed = _files(line.patches)
    commit_project(stack)
    shutil.rmtree(line.src)
    carry(stack, "0.0.2")
    assert _files(line.patches) == committed


def test_a_patch_skipped_during_the_carry_stays_left_out(stack, monkeypatch):
    series_abc(stack)
    new_release(stack, monkeypatch, "0.0.2", UPSTREAMED_A_CONFLICTS_B)
    line = stack.line("0.0.2")
    with pytest.raises(UserError, match="stopped at patch 2/3 Core-B.patch"):
        carry(stack, "0.0.2")
    git(line.src, "rebase", "--skip")
    carry(stack, "0.0.2")
    assert read_series(line) == ["Core-C.patch"]
    record = (line.patches / "carried.toml").read_text()
    assert '[[left_out]]\nsource = "Core-B.patch"' in record
    committed = _files(line.patches)
    commit_project(stack)

    # Carried again from a fresh clone: B is not tried, nothing stops.
    shutil.rmtree(line.src)
    carry(stack, "0.0.2")
    assert _files(line.patches) == committed


def _commit_in_line(line: Line, old: str, new: str, subject: str) -> None:
    """A patch written in the line: committed at its tip and exported."""
    apply(line)
    commit_change(line.src, "vllm/core.py", old, new, subject)
    export(line)


def test_patches_written_in_the_line_are_recorded_and_replayed_in_place(
        stack, monkeypatch):
    series_abc(stack)
    new_release(stack, monkeypatch, "0.0.2", UPSTREAMED_A_CONFLICTS_B)
    line = _carry_resolving_b(stack)
    # Written in front of the line's patches, as a prerequisite of them.
    apply(line)
    carried = git(line.src, "rev-parse", "series").strip()
    git(line.src, "checkout", "-q", "-B", "series", "v0.0.2")
    commit_change(line.src, "vllm/core.py", "line 6\n", "line six\n",
                  "[Bugfix] First")
    git(line.src, "-c", "user.name=t", "-c", "user.email=t@t", "cherry-pick",
        f"v0.0.2..{carried}")
    export(line)
    _commit_in_line(line, "line 18\n", "line eighteen\n", "[Bugfix] Last")
    assert read_series(line) == [
        "Bugfix-First.patch", "Core-B.patch", "Core-C.patch",
        "Bugfix-Last.patch"
    ]
    record = (line.patches / "carried.toml").read_text()
    assert record.index('patch = "Bugfix-First.patch"\n\n') < record.index(
        'patch = "Core-B.patch"\nsource = "Core-B.patch"')
    assert 'patch = "Bugfix-Last.patch"\n' in record
    committed = _files(line.patches)
    commit_project(stack)

    shutil.rmtree(line.src)
    carry(stack, "0.0.2")
    assert _files(line.patches) == committed
    assert git(line.src, "status", "--porcelain") == ""


def test_a_carried_patch_taken_out_of_the_line_is_left_out_after(
        stack, monkeypatch):
    series_abc(stack)
    new_release(stack, monkeypatch, "0.0.2", UPSTREAMED_A_CONFLICTS_B)
    line = _carry_resolving_b(stack)
    apply(line)
    git(line.src, "reset", "-q", "--hard", "series~1")  # C taken out
    export(line)
    record = (line.patches / "carried.toml").read_text()
    assert 'patch = "Core-C.patch"' not in record
    assert '[[left_out]]\nsource = "Core-C.patch"' in record
    committed = _files(line.patches)
    commit_project(stack)
    shutil.rmtree(line.src)
    carry(stack, "0.0.2")
    assert _files(line.patches) == committed


def test_a_changed_source_patch_is_refused_before_anything_moves(
        stack, monkeypatch):
    series_abc(stack)
    new_release(stack, monkeypatch, "0.0.2", UPSTREAMED_A_CONFLICTS_B)
    line = _carry_resolving_b(stack)
    commit_project(stack)
    tip = git(line.src, "rev-parse", "series")
    source_b = stack.patches / "Core-B.patch"
    source_b.write_text(source_b.read_text().replace(
        "Why: the test needs a change.", "Why: a reviewer asked for more."))
    with pytest.raises(UserError,
                       match=r"changed since lines/0.0.2/ recorded how "
                       r"they are carried: Core-B.patch") as err:
        carry(stack, "0.0.2")
    assert "carried.toml" in err.value.hint
    assert git(line.src, "rev-parse", "series") == tip


def test_a_recorded_version_that_no_longer_applies_stops_clearly(
        stack, monkeypatch):
    series_abc(stack)
    new_release(stack, monkeypatch, "0.0.2", UPSTREAMED_A_CONFLICTS_B)
    line = _carry_resolving_b(stack)
    recorded_c = line.patches / "Core-C.patch"
    # The recorded C now edits a line 0.0.2 does not have.
    recorded_c.write_text(recorded_c.read_text().replace(
        "-line 15", "-line 15 of a tree that never was"))
    commit_project(stack)
    with pytest.raises(UserError,
                       match=r"recorded version lines/0.0.2/Core-C.patch "
                       r"does not apply on v0.0.2"):
        carry(stack, "0.0.2")
    abort_carry(stack, None)
    assert git(line.src, "status", "--porcelain") == ""
    assert not (stack.build / "carry-0.0.2").exists()


def test_carry_keeps_uncommitted_work_in_the_lines_vllm_src(
        stack, monkeypatch):
    series_abc(stack)
    new_release(stack, monkeypatch, "0.0.2", UPSTREAMED_A_CONFLICTS_B)
    line = _carry_resolving_b(stack)
    (line.src / "vllm/core.py").write_text("work in progress\n")
    with pytest.raises(UserError, match="uncommitted changes"):
        carry(stack, "0.0.2")
    assert (line.src / "vllm/core.py").read_text() == "work in progress\n"


def test_line_picks_the_patches_vllm_src_and_venv_of_a_release(
        stack, monkeypatch):
    series_abc(stack)
    new_release(stack, monkeypatch, "0.0.2", UPSTREAMED_A_CONFLICTS_B)
    line = _carry_resolving_b(stack)
    monkeypatch.setenv("PSTACK_LINE", "0.0.2")
    assert Line.default() == line
    assert line.venv == stack.root / ".venv-0.0.2"
    monkeypatch.setenv("PSTACK_LINE", "0.0.1")
    assert Line.default().patches == stack.patches
    monkeypatch.setenv("PSTACK_LINE", "0.0.3")
    with pytest.raises(UserError, match="no line on vLLM 0.0.3") as err:
        Line.default()
    assert "its lines: 0.0.1, 0.0.2;" in err.value.hint


def test_todo_plan_drops_and_replays_by_abbreviated_commit():
    drop, replay, keep = "a" * 40, "b" * 40, "c" * 40
    plan = TodoPlan(drop=[drop], replay={replay: "/x/My patch.patch"})
    todo = (f"pick {drop[:7]} [Core] A\npick {replay[:12]} [Core] B\n"
            f"pick {keep[:7]} [Core] C\n# comment\n")
    assert plan.edit(todo) == (
        f"drop {drop[:7]} [Core] A\n"
        "exec git am --3way --keep --keep-cr --committer-date-is-author-date"
        " --quiet '/x/My patch.patch'\n"
        f"pick {keep[:7]} [Core] C\n# comment\n")


def test_each_line_writes_its_results_and_scratch_trees_apart(stack):
    line = stack.line("0.0.2")
    assert stack.out == stack.root / "out" / "0.0.1"
    assert stack.build == stack.root / "build" / "0.0.1"
    assert stack.dist == stack.root / "dist" / "0.0.1"
    assert line.out == stack.root / "out" / "0.0.2"
    assert line.build == stack.root / "build" / "0.0.2"
    assert line.dist == stack.root / "dist" / "0.0.2"


def test_todo_plan_adds_the_patches_written_in_the_line_in_place():
    first, keep = "a" * 40, "c" * 40
    plan = TodoPlan(insert={"": ["/x/New first.patch"], first: ["/x/N.patch"]})
    todo = f"pick {first[:7]} [Core] A\npick {keep[:7]} [Core] C\n"
    am = ("exec git am --3way --keep --keep-cr --committer-date-is-author-date"
          " --quiet")
    assert plan.edit(todo) == (f"{am} '/x/New first.patch'\n"
                               f"pick {first[:7]} [Core] A\n"
                               f"{am} /x/N.patch\n"
                               f"pick {keep[:7]} [Core] C\n")


def test_a_stop_in_a_carry_of_another_line_names_that_line(stack, monkeypatch):
    series_abc(stack)
    new_release(stack, monkeypatch, "0.0.2", UPSTREAMED_A_CONFLICTS_B)
    line = _carry_resolving_b(stack)
    commit_project(stack)
    new_release(stack, monkeypatch, "0.0.3", {
        **UPSTREAMED_A_CONFLICTS_B, "line 15\n": "line FIFTEEN\n"
    })
    with pytest.raises(UserError, match="stopped at patch 2/2") as err:
        carry(line, "0.0.3")
    # The commands given go on with the carry of patches-0.0.2/, not with
    # one of the default line.
    assert "`make rebase TO=0.0.3 LINE=0.0.2` continues" in err.value.hint
    assert "`make rebase-abort LINE=0.0.2` restores" in err.value.hint


def test_a_renamed_patch_is_found_absorbed_by_its_sources_record(
        stack, monkeypatch, capsys):
    series_abc(stack)
    # upstream.toml names patches as the default line does.
    write_upstream_record(stack, [("Core-B.patch", ["line 9 (#1)"])])
    commit_project(stack)
    new_release(stack, monkeypatch, "0.0.2", UPSTREAMED_A_CONFLICTS_B)
    line = _carry_resolving_b(stack, subject="[Core] B on 0.0.2's NINE")
    commit_project(stack)
    new_release(stack, monkeypatch, "0.0.3", {
        "line 3\n": "line three\n",
        "line 9\n": "line 9 (#1)\n"
    })
    capsys.readouterr()
    carry(line, "0.0.3")
    assert ("patch 1/2 Core-B-on-0.0.2-s-NINE.patch: absorbed by "
            "vllm-project/vllm#1" in capsys.readouterr().out)
    assert read_series(line.line("0.0.3")) == ["Core-C.patch"]


def test_carrying_again_carries_the_line_the_record_names(
        stack, monkeypatch, capsys):
    series_abc(stack)
    new_release(stack, monkeypatch, "0.0.2", UPSTREAMED_A_CONFLICTS_B)
    line = _carry_resolving_b(stack)
    commit_project(stack)
    # 0.0.3 is carried from the line on 0.0.2, not from the default line.
    new_release(stack, monkeypatch, "0.0.3", {
        **UPSTREAMED_A_CONFLICTS_B, "line 20\n": "line TWENTY\n"
    })
    carry(line, "0.0.3")
    newer = stack.line("0.0.3")
    assert 'carried_from = "0.0.2"' in (newer.patches /
                                        "carried.toml").read_text()
    committed = _files(newer.patches)
    commit_project(stack)

    # A fresh clone's `make rebase TO=0.0.3`, without LINE=: the default
    # line on the command line, the line on 0.0.2 carried, the same bytes.
    shutil.rmtree(newer.src)
    capsys.readouterr()
    source = recorded_source(stack, "0.0.3")
    assert source.patches == line.patches
    assert "carried from lines/0.0.2/" in capsys.readouterr().out
    carry(source, "0.0.3")
    assert _files(newer.patches) == committed
    # Carrying onto 0.0.2 again still starts from the default line.
    assert recorded_source(stack, "0.0.2") == stack
