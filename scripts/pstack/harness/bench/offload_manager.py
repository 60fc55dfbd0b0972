"""Operations per second of the LRU and ARC managers on a full pool of 1M
CPU blocks."""

from __future__ import annotations

from ...core.layout import Layout
from .runner import run_script


def run(layout: Layout) -> None:
    print("\n## Offloading manager on a full pool of 1M CPU blocks "
          "(lookup + prepare_store + complete_store + touch, 16 blocks per "
          "call)")
    rows = run_script(layout, "offload_manager.py", layout.src)
    print(f"{'policy':>8} {'ops/s':>10} {'blocks/s':>10} {'fill 1M (s)':>12}")
    for r in rows:
        print(
            f"{r['policy']:>8} {r['ops_per_s']:>10,} {r['blocks_per_s']:>10,} "
            f"{r['fill_seconds']:>12.1f}")
