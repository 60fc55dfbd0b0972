"""Offline generation with offloading off (no connector), the series
against the unpatched base: tokens per wall second and per CPU second."""

from __future__ import annotations

import statistics

from ...core.line import Line
from ..testenv import ENGINE_ENV
from ..tiny_models import generate
from .runner import alternating_rounds, base_tree

ROUNDS = 4
TARGET = 0.98
METRICS = {
    "output_tok_per_cpu_s": "per CPU-second",
    "output_tok_per_s": "wall"
}


def run(layout: Line) -> None:
    print(
        "\n## Engine throughput with offloading off, series vs v0.9.2 (CPU "
        "engine, bench-llama fp32; 8 prompts x 128 tokens, 64 generated; "
        f"{ROUNDS} rounds, each a process of both trees in alternating "
        "order, 3 repeats each)",
        flush=True)
    model = str(generate("bench-llama"))
    rounds = alternating_rounds(
        layout, "measure_engine_throughput.py", "engine throughput", {
            "v0.9.2": (base_tree(layout), (model, )),
            "series": (layout.src, (model, ))
        }, ROUNDS, ENGINE_ENV)

    def median(name: str, key: str) -> float:
        return statistics.median(r[key] for repeats in rounds[name]
                                 for r in repeats)

    print(f"{'tree':>8} {'out tok/s':>10} {'out tok/CPU-s':>14} "
          "(medians of all repeats)")
    for name in rounds:
        print(f"{name:>8} {median(name, 'output_tok_per_s'):>10.2f} "
              f"{median(name, 'output_tok_per_cpu_s'):>14.2f}")
    # The ratio of the medians over all repeats (12 per tree) is the steady
    # figure; the ratio within each round (its two processes ran next to
    # each other) shows the spread. CPU time (one OpenMP thread) is less
    # disturbed by other load than wall time.
    for key, label in METRICS.items():
        ratio = median("series", key) / median("v0.9.2", key)
        per_round = [
            statistics.median(r[key] for r in series) /
            statistics.median(r[key] for r in base)
            for series, base in zip(rounds["series"], rounds["v0.9.2"])
        ]
        verdict = "met" if ratio >= TARGET else "NOT met"
        print(f"series / v0.9.2 {label}: {ratio:.3f}x (per round "
              f"{', '.join(f'{r:.3f}' for r in per_round)}; target >= "
              f"{TARGET}x: {verdict})")
