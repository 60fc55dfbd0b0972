"""`make rebase-report`: the rebase tried on a copy, past every conflict."""

from __future__ import annotations

import re
import shutil

from conftest import UPSTREAMED_A_CONFLICTS_B, commit_change, new_release
from pstack.queue.apply import apply
from pstack.queue.export import export


def test_rebase_report_goes_past_conflicts_in_a_scratch_tree(
        stack, monkeypatch, tmp_path):
    from pstack.queue.rebase_report import report
    apply(stack)
    commit_change(stack.src, "vllm/core.py", "line 3\n", "line three\n",
                  "[Core] A")
    commit_change(stack.src, "vllm/core.py", "line 9\n", "line nine\n",
                  "[Core] B")
    commit_change(stack.src, "vllm/core.py", "line nine\n", "line 9 again\n",
                  "[Core] C")
    commit_change(stack.src, "vllm/core.py", "line 15\n", "line fifteen\n",
                  "[Core] D")
    export(stack)
    shutil.rmtree(stack.src)  # the report never needs (nor touches) vllm-src
    new_release(stack, monkeypatch, "0.0.2", UPSTREAMED_A_CONFLICTS_B)
    docs = tmp_path / "docs"
    (docs).mkdir()
    (docs / "rebase-0.0.2.md").write_text("# Notes by hand\n\nKept.\n")
    doc = report(stack, "0.0.2", tmp_path / "scratch", docs)
    text = doc.read_text()
    assert text.startswith("# Notes by hand\n\nKept.\n")
    assert "| 1 | [Core] A | dropped: already upstream |" in text
    assert "| 2 | [Core] B | **conflict**: `vllm/core.py` |" in text
    # C builds on B: it applies once B's conflict is resolved to the patch's
    # side.
    assert "| 3 | [Core] C | applies cleanly (after the conflicts" in text
    assert "| `vllm/core.py` | line 9 | +2 -2 |" in text
    assert "Core-D" not in text and "[Core] D | applies cleanly" in text
    details = (docs / "rebase-0.0.2.conflicts.txt").read_text()
    assert "=== patch 2/4: [Core] B" in details and "line NINE" in details
    # The range-diff is written too, flagged as showing unreviewed
    # resolutions of the conflicting patch.
    range_diff = (docs / "rebase-0.0.2.range-diff").read_text()
    assert range_diff.startswith(
        "# The conflicting hunks of patches 2 were resolved")
    assert re.search(r"\[Core\] B", range_diff)
    assert not stack.src.exists()
    # Regenerating replaces the generated part only.
    report(stack, "0.0.2", tmp_path / "scratch", docs)
    assert doc.read_text() == text
