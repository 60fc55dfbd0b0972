"""Which line a command works on when LINE= names none, and what a line
without a CPU runtime (vLLM published no CPU build of its release) is."""

from __future__ import annotations

import pytest
from conftest import write_lines
from pstack.core.errors import UserError
from pstack.core.line import (NO_RUNTIME, PUBLISHED_WHEEL, SOURCE_BUILT, Line,
                              users_line)


@pytest.fixture
def checkout(tmp_path):
    """The lines of this project as of vLLM 0.33: the oldest builds its
    runtime, 0.10.2 and 0.32.0 pin a published CPU wheel, 0.33.0 none."""
    write_lines(tmp_path, {
        "0.9.2": False,
        "0.10.2": True,
        "0.32.0": True,
        "0.33.0": False
    })
    return tmp_path


def test_a_line_whose_release_published_no_cpu_wheel_has_no_runtime(checkout):
    oldest = Line.at(checkout, "0.9.2", checkout / "cache")
    runtimes = {line.version: line.runtime for line in oldest.lines()}
    # 0.10.2's tree is not materialized: it would share the oldest line's
    # runtime once it is; either way it has one.
    assert runtimes["0.9.2"] == SOURCE_BUILT
    assert runtimes["0.10.2"] in (SOURCE_BUILT, PUBLISHED_WHEEL)
    assert runtimes["0.32.0"] == PUBLISHED_WHEEL
    assert runtimes["0.33.0"] == NO_RUNTIME


def test_the_default_line_is_the_newest_with_a_runtime(checkout, monkeypatch):
    assert users_line(checkout, checkout / "cache").version == "0.32.0"
    # Named by LINE=newest, or by its version, the newer line is used.
    monkeypatch.setenv("PSTACK_PATCHES", str(checkout / "lines" / "0.32.0"))
    monkeypatch.setenv("PSTACK_LINE", "newest")
    assert Line.default().version == "0.33.0"
    monkeypatch.setenv("PSTACK_LINE", "0.33.0")
    assert Line.default().version == "0.33.0"
    monkeypatch.delenv("PSTACK_LINE")
    assert Line.default().newest.version == "0.33.0"


def test_running_a_line_without_a_runtime_is_refused_in_one_line(checkout):
    line = Line.at(checkout, "0.33.0", checkout / "cache")
    with pytest.raises(UserError) as refused:
        line.refuse_without_runtime("make bench")
    assert "make bench needs a CPU runtime" in str(refused.value)
    assert "line 0.33.0 has none" in str(refused.value)
    assert refused.value.hint.endswith("0.9.2, 0.10.2, 0.32.0")
    line.line("0.32.0").refuse_without_runtime("make bench")  # has one
