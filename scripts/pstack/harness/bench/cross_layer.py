"""Store and load time of one 2048-token request with per-layer vs
cross-layer KV blocks."""

from __future__ import annotations

from ...core.line import Line
from .runner import run_script


def run(layout: Line) -> None:
    print("\n## Per-layer vs cross-layer KV blocks on the CPU platform: one "
          "2048-token request (128 blocks of 16 tokens, bf16, shuffled) "
          "stored and loaded back")
    rows = run_script(layout, "measure_cross_layer.py", layout.src)
    print(f"{'model shape':>12} {'layout':>12} {'copies/block':>13} "
          f"{'bytes/copy':>11} {'MiB':>6} {'store ms':>9} {'load ms':>8}")
    for r in rows:
        print(f"{r['shape']:>12} {r['layout']:>12} "
              f"{r['copies_per_block']:>13} {r['bytes_per_copy']:>11,} "
              f"{r['request_mib']:>6.1f} {r['store_ms']:>9.2f} "
              f"{r['load_ms']:>8.2f}")
    by_key = {(r["shape"], r["layout"]): r for r in rows}
    for shape in dict.fromkeys(r["shape"] for r in rows):
        per, cross = by_key[(shape, "per-layer")], by_key[(shape,
                                                           "cross-layer")]
        print(f"{shape}: cross-layer store "
              f"{per['store_ms'] / cross['store_ms']:.1f}x, load "
              f"{per['load_ms'] / cross['load_ms']:.1f}x faster")
