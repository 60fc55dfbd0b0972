"""Side-by-side rounds of the engine benchmarks (the scripts themselves run
in `make bench`)."""

from __future__ import annotations

from pathlib import Path

from pstack.core.layout import Layout
from pstack.harness.bench import runner


def test_alternating_rounds_reverse_the_order_every_other_round(
        tmp_path, monkeypatch):
    calls = []

    def fake_run_script(layout, script, tree, *args, env):
        calls.append((script, tree.name, args, env["X"]))
        return [{"call": len(calls)}]

    monkeypatch.setattr(runner, "run_script", fake_run_script)
    layout = Layout(patches=tmp_path / "patches",
                    src=tmp_path / "vllm-src",
                    cache=tmp_path / "cache")
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
