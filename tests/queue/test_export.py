"""`make export` writes each line's patches/README.md as a function of its
patches folder alone, so `make rebase` writes the same file every time."""

from __future__ import annotations

import shutil

from conftest import commit_project, new_release, series_abc
from pstack.core import markers
from pstack.queue.export import export
from pstack.queue.rebase import carry
from pstack.queue.series_table import COMMAND, readme, series_table

HEAD = "# Our series\n\nHand-written, kept by export.\n\n"


def test_a_carried_line_gets_the_default_head_and_its_own_table(
        stack, monkeypatch):
    series_abc(stack)
    text = readme(stack).read_text()
    readme(stack).write_text(HEAD + text[text.index("<!-- BEGIN"):])
    export(stack)
    assert readme(stack).read_text().startswith(HEAD), "export keeps it"
    commit_project(stack)
    new_release(stack, monkeypatch, "0.0.2", {})
    line = stack.line("0.0.2")
    carry(stack, "0.0.2")
    written = readme(line).read_text()
    assert written == (f"{HEAD}{markers.begin_marker(COMMAND)}\n"
                       f"{series_table(line)}\n{markers.END}\n")
    assert "3 patches on vLLM 0.0.2:" in written
    assert "| [1](Core-A.patch) |" in written
    assert "0.0.2" not in readme(stack).read_text(), "the default line's"
    commit_project(stack)
    # A fresh clone carries again: the same bytes.
    shutil.rmtree(line.src)
    carry(stack, "0.0.2")
    assert readme(line).read_text() == written
