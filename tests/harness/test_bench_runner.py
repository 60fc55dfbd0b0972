"""Side-by-side rounds of the engine benchmarks (the scripts themselves run
in `make bench`)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from conftest import write_base_pin
from pstack.core.errors import UserError
from pstack.core.line import Line
from pstack.harness import bench
from pstack.harness.bench import runner


def test_alternating_rounds_reverse_the_order_every_other_round(
        tmp_path, monkeypatch):
    calls = []

    def fake_run_script(layout, script, tree, *args, env):
        calls.append((script, tree.name, args, env["X"]))
        return [{"call": len(calls)}]

    monkeypatch.setattr(runner, "run_script", fake_run_script)
    layout = Line.at(tmp_path, "0.9.2", tmp_path / "cache")
    results = runner.alternating_rounds(layout,
                                        "step.py",
                                        "step", {
                                            "base":
                                            (Path("/trees/base"), ("model", )),
                                            "patched":
                                            (Path("/trees/patched"),
                                             ("model", "--connector"))
                                        },
                                        rounds=3,
                                        env={"X": "1"})

    assert [(tree, args) for _, tree, args, _ in calls] == [
        ("base", ("model", )),
        ("patched", ("model", "--connector")),
        ("patched", ("model", "--connector")),
        ("base", ("model", )),
        ("base", ("model", )),
        ("patched", ("model", "--connector")),
    ]
    assert all(script == "step.py" and x == "1" for script, _, _, x in calls)
    # Per side, one entry per round, in round order.
    assert results == {
        "base": [[{
            "call": 1
        }], [{
            "call": 4
        }], [{
            "call": 5
        }]],
        "patched": [[{
            "call": 2
        }], [{
            "call": 3
        }], [{
            "call": 6
        }]],
    }


def test_a_failing_script_is_a_user_error_after_its_stderr(
        tmp_path, monkeypatch, capsys):
    (tmp_path / "fails.py").write_text(
        "import sys\nprint('Traceback: boom', file=sys.stderr)\nsys.exit(3)\n")
    monkeypatch.setattr(runner, "SCRIPTS", tmp_path)
    layout = Line.at(tmp_path, "0.9.2", tmp_path / "cache")
    with pytest.raises(UserError, match="fails.py failed with exit status 3"):
        runner.run_script(layout, "fails.py", tmp_path / "tree", "--x")
    assert "Traceback: boom" in capsys.readouterr().err


def test_an_unknown_benchmark_is_a_user_error(tmp_path):
    layout = Line.at(tmp_path, "0.9.2", tmp_path / "cache")
    layout.patches.mkdir(parents=True)
    write_base_pin(layout.base_file, "0.9.2")
    with pytest.raises(UserError, match="unknown benchmark 'nope'") as err:
        bench.run(argparse.Namespace(names=["nope"]), layout)
    assert "step-overhead" in err.value.hint
