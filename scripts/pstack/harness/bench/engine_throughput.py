"""Offline generation with offloading off (no connector), the series
against the unpatched base: tokens per wall second and per CPU second."""

from __future__ import annotations

from ...core.errors import progress
from ...core.layout import Layout
from ..testenv import ENGINE_ENV
from ..tiny_models import generate
from .runner import base_tree, run_script

ROUNDS = 2


def run(layout: Layout) -> None:
    print(
        "\n## Engine throughput with offloading off, series vs v0.9.2 (CPU "
        "engine, bench-llama fp32; 8 prompts x 128 tokens, 64 generated; "
        f"{ROUNDS} alternating rounds x 3 repeats)",
        flush=True)
    model = str(generate("bench-llama"))
    trees = {"v0.9.2": base_tree(layout), "series": layout.src}
    results: dict[str, list[dict]] = {name: [] for name in trees}
    for r in range(ROUNDS):
        for name, tree in trees.items():
            progress(f"engine throughput: {name}, round {r + 1}/{ROUNDS}")
            results[name] += run_script(layout,
                                        "engine_throughput.py",
                                        tree,
                                        model,
                                        env=ENGINE_ENV)
    # Wall time suffers from other load on the machine; the process's CPU
    # time (one OpenMP thread) much less, so its ratio is the steadier one.
    print(f"{'tree':>8} {'out tok/s best':>15} {'median':>8} "
          f"{'out tok/CPU-s best':>19} {'median':>8}")
    stat: dict[tuple[str, str, str], float] = {}
    for name, rows in results.items():
        for key in ("output_tok_per_s", "output_tok_per_cpu_s"):
            values = sorted(r[key] for r in rows)
            stat[name, key, "best"] = values[-1]
            stat[name, key, "median"] = values[len(values) // 2]
        print(f"{name:>8} {stat[name, 'output_tok_per_s', 'best']:>15.2f} "
              f"{stat[name, 'output_tok_per_s', 'median']:>8.2f} "
              f"{stat[name, 'output_tok_per_cpu_s', 'best']:>19.2f} "
              f"{stat[name, 'output_tok_per_cpu_s', 'median']:>8.2f}")
    for how in ("best", "median"):
        cpu, wall = (stat["series", k, how] / stat["v0.9.2", k, how]
                     for k in ("output_tok_per_cpu_s", "output_tok_per_s"))
        print(f"series / v0.9.2 ({how}): {cpu:.3f}x per CPU-second, "
              f"{wall:.3f}x wall")
    print("(target >= 0.98; on a shared machine repeats vary by several %: "
          "compare runs)")
