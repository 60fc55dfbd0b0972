"""What the OffloadingConnector adds to each engine step on a workload it
cannot help (no reuse at all), against the same engine without it: the
scheduler's and the worker's time per step, and throughput."""

from __future__ import annotations

import statistics

from ...core.line import Line
from ..testenv import ENGINE_ENV
from ..tiny_models import generate
from .runner import alternating_rounds

ROUNDS = 3
TARGET = 0.98


def run(layout: Line) -> None:
    print(
        "\n## Step overhead of the OffloadingConnector with no reuse at all "
        "(CPU engine, bench-llama fp32; 8 new prompts x 512 tokens, 32 "
        f"generated; {ROUNDS} rounds, each a process without and one with "
        "the connector, in alternating order, 3 repeats each)",
        flush=True)
    model = str(generate("bench-llama"))
    rows = alternating_rounds(
        layout, "measure_step_overhead.py", "step overhead", {
            "no connector": (layout.src, (model, )),
            "offloading": (layout.src, (model, "--connector"))
        }, ROUNDS, ENGINE_ENV)

    def median_of(name: str, key: str) -> float:
        return statistics.median(r[key] for repeats in rows[name]
                                 for r in repeats)

    print(f"{'engine':>13} {'tok/s':>8} {'scheduler ms/step':>18} "
          f"{'worker ms/step':>15} {'steps':>6}")
    for name in rows:
        print(f"{name:>13} {median_of(name, 'tok_per_s'):>8.1f} "
              f"{median_of(name, 'scheduler_ms_per_step'):>18.3f} "
              f"{median_of(name, 'worker_ms_per_step'):>15.1f} "
              f"{median_of(name, 'steps'):>6.0f}")
    # The ratio of the medians over all repeats is the steady figure; the
    # ratio within each round (its two processes ran next to each other)
    # shows the spread.
    ratio = (median_of("offloading", "tok_per_s") /
             median_of("no connector", "tok_per_s"))
    ratios = [
        statistics.median(r["tok_per_s"] for r in with_connector) /
        statistics.median(r["tok_per_s"]
                          for r in without) for with_connector, without in zip(
                              rows["offloading"], rows["no connector"])
    ]
    added = (median_of("offloading", "scheduler_ms_per_step") +
             median_of("offloading", "worker_ms_per_step") -
             median_of("no connector", "scheduler_ms_per_step") -
             median_of("no connector", "worker_ms_per_step"))
    print(f"offloading / no connector: {ratio:.3f}x throughput (per round "
          f"{', '.join(f'{r:.3f}' for r in ratios)}), "
          f"{added:+.2f} ms per step (target >= {TARGET}x: "
          f"{'met' if ratio >= TARGET else 'NOT met'})")
