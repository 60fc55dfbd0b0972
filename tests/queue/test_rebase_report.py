"""`make rebase-report`: the rebase tried on a copy, past every conflict."""

from __future__ import annotations

import re
import shutil

from conftest import (ABSORBS_A, UPSTREAMED_A_CONFLICTS_B, export_core_series,
                      new_release, write_upstream_record)


def test_rebase_report_goes_past_conflicts_in_a_scratch_tree(
        stack, monkeypatch, tmp_path):
    from pstack.queue.rebase_report import report
    export_core_series(stack, [("line 3\n", "line three\n", "[Core] A"),
                               ("line 9\n", "line nine\n", "[Core] B"),
                               ("line nine\n", "line 9 again\n", "[Core] C"),
                               ("line 15\n", "line fifteen\n", "[Core] D")])
    shutil.rmtree(stack.src)  # the report never needs (nor touches) vllm-src
    new_release(stack, monkeypatch, "0.0.2", UPSTREAMED_A_CONFLICTS_B)
    docs = tmp_path / "docs"
    reports = docs / "reports" / "0.0.2"
    reports.mkdir(parents=True)
    (reports / "report.md").write_text("# Notes by hand\n\nKept.\n")
    doc = report(stack, "0.0.2", tmp_path / "scratch", docs)
    assert doc == reports / "report.md"
    text = doc.read_text()
    assert text.startswith("# Notes by hand\n\nKept.\n")
    assert ("| 1 | [Core] A | dropped: already upstream (its diff is in the "
            "release) |" in text)
    assert "| 2 | [Core] B | **conflict**: `vllm/core.py` |" in text
    # C builds on B: it applies once B's conflict is resolved to the patch's
    # side.
    assert "| 3 | [Core] C | applies cleanly (after the conflicts" in text
    assert "| `vllm/core.py` | line 9 | +2 -2 |" in text
    assert "Core-D" not in text and "[Core] D | applies cleanly" in text
    details = (reports / "report.conflicts.txt").read_text()
    assert "=== patch 2/4: [Core] B" in details and "line NINE" in details
    # The range-diff is written too, flagged as showing unreviewed
    # resolutions of the conflicting patch.
    range_diff = (reports / "report.range-diff").read_text()
    assert range_diff.startswith(
        "# The conflicting hunks of patches 2 were resolved")
    assert re.search(r"\[Core\] B", range_diff)
    assert not stack.src.exists()
    # Regenerating replaces the generated part only.
    report(stack, "0.0.2", tmp_path / "scratch", docs)
    assert doc.read_text() == text


def test_rebase_report_names_absorbed_and_partly_absorbed_patches(
        stack, monkeypatch, tmp_path):
    from pstack.queue.rebase_report import report
    export_core_series(stack, [("line 3\n", "line three\n", "[Core] A"),
                               ("line 15\n", "line fifteen\n", "[Core] B")])
    write_upstream_record(stack, [("Core-A.patch", ["line 3 (#1)"]),
                                  ("Core-B.patch", ["line 3 (#1)", "gone"])])
    new_release(stack, monkeypatch, "0.0.2", ABSORBS_A)
    docs = tmp_path / "docs"
    doc = report(stack, "0.0.2", tmp_path / "scratch", docs)
    text = doc.read_text()
    assert ("| 1 | [Core] A | dropped: absorbed by vllm-project/vllm#1: "
            "`vllm/core.py:3` |" in text)
    assert ("| 2 | [Core] B | partly absorbed by vllm-project/vllm#1: "
            "`vllm/core.py:3`; `vllm/core.py` lacks `gone`; applies cleanly |"
            in text)
    range_diff = (docs / "reports/0.0.2/report.range-diff").read_text()
    assert re.search(r"1: +[0-9a-f]+ < +-: +-+ \[Core\] A", range_diff)


def test_rebase_report_step_by_step_tables_each_patch_per_release(
        stack, monkeypatch, tmp_path):
    import pstack.queue.rebase_in_place
    from pstack.queue.rebase_report import report_steps
    export_core_series(stack, [("line 3\n", "line three\n", "[Core] A"),
                               ("line 9\n", "line nine\n", "[Core] B"),
                               ("line 15\n", "line fifteen\n", "[Core] C")])
    write_upstream_record(stack, [("Core-A.patch", ["line 3 (#1)"])])
    # 0.0.2 changes B's line its own way; 0.0.3 also absorbs A.
    pins = {
        "0.0.2":
        new_release(stack, monkeypatch, "0.0.2", {"line 9\n": "line NINE\n"}),
        "0.0.3":
        new_release(stack, monkeypatch, "0.0.3", {
            "line 9\n": "line NINE\n",
            **ABSORBS_A
        }),
    }
    monkeypatch.setattr(pstack.queue.rebase_in_place, "find_release",
                        lambda version, like: pins[version])
    docs = tmp_path / "docs"
    doc = report_steps(stack, ["0.0.2", "0.0.3"], tmp_path / "scratch", docs)
    assert doc == docs / "reports/0.0.3/report-steps.md"
    text = doc.read_text()
    assert 'make rebase-report TO="0.0.2 0.0.3"' in text
    assert "| # | patch | 0.0.1 → 0.0.2 | 0.0.2 → 0.0.3 |" in text
    assert "| 1 | [Core] A | applied | absorbed |" in text
    # B's conflict was resolved to its side in step 1: step 2 starts from
    # that and applies it.
    assert "| 2 | [Core] B | **conflict** | applied |" in text
    assert "| 3 | [Core] C | applied | applied |" in text
    assert ("Each step's report: [0.0.2](../0.0.2/report.md), "
            "[0.0.3](report.md)" in text)
    for version in ("0.0.2", "0.0.3"):
        assert (docs / f"reports/{version}/report.md").exists()
        assert (docs / f"reports/{version}/report.range-diff").exists()
    step2 = (docs / "reports/0.0.3/report.md").read_text()
    # Regenerated by the whole chain, since it starts from step 1's result.
    assert 'make rebase-report TO="0.0.2 0.0.3"' in step2
    assert "(3 patches on v0.0.2)" in step2
    assert "dropped: absorbed by vllm-project/vllm#1" in step2


def test_rebase_report_names_conflicts_the_line_has_resolved(
        stack, monkeypatch, tmp_path):
    import hashlib

    from pstack.queue.carried import CarriedPatch, Record, write_record
    from pstack.queue.rebase_report import report, report_steps
    export_core_series(stack, [("line 9\n", "line nine\n", "[Core] B"),
                               ("line 15\n", "line fifteen\n", "[Core] D")])
    pin = new_release(stack, monkeypatch, "0.0.2", UPSTREAMED_A_CONFLICTS_B)
    # The checkout's line on 0.0.2, with B resolved by hand and recorded.
    line = stack.line("0.0.2")
    line.patches.mkdir()
    pin.dump(line.base_file)
    (line.patches / "Core-B.patch").write_text("B, resolved by hand\n")
    source = stack.patches / "Core-B.patch"
    write_record(
        line, stack,
        Record(
            (CarriedPatch("Core-B.patch", "Core-B.patch",
                          hashlib.sha256(source.read_bytes()).hexdigest()), )))
    docs = tmp_path / "docs"

    text = report(stack, "0.0.2", tmp_path / "scratch", docs).read_text()
    assert ("| 1 | [Core] B | **conflict**: `vllm/core.py`; resolved in "
            "`lines/0.0.2/Core-B.patch` (recorded: `make rebase` replays "
            "it) |" in text)
    steps = report_steps(stack, ["0.0.2"], tmp_path / "scratch",
                         docs).read_text()
    assert "| 1 | [Core] B | **conflict resolved (recorded)** |" in steps

    # A source changed since its resolution was recorded: a plain conflict.
    source.write_text(source.read_text() + "\n")
    text = report(stack, "0.0.2", tmp_path / "scratch", docs).read_text()
    assert "| 1 | [Core] B | **conflict**: `vllm/core.py` |" in text
