"""GB/s of the CPU-platform offloading handler storing and loading shuffled
blocks, against a plain copy."""

from __future__ import annotations

from ...core.layout import Layout
from .runner import run_script


def run(layout: Layout) -> None:
    print("\n## CPU-platform offloading handler: 256 MiB of shuffled blocks "
          "stored and loaded back, vs one plain tensor.copy_ of 256 MiB "
          "(GB/s, best of 5)")
    rows = run_script(layout, "transfer.py", layout.src)
    print(f"{'block':>8} {'store':>7} {'load':>7} {'plain':>7} "
          f"{'vs plain':>9} {'plain 1T':>9} {'vs 1T':>6}")
    short = []
    for r in rows:
        slower = min(r["store_gbps"], r["load_gbps"])
        vs_plain = slower / r["plain_copy_gbps"]
        if r["block_kib"] >= 256 and vs_plain < 0.7:
            short.append(f"{r['block_kib']} KiB")
        print(f"{r['block_kib']:>6}Ki {r['store_gbps']:>7.2f} "
              f"{r['load_gbps']:>7.2f} {r['plain_copy_gbps']:>7.2f} "
              f"{vs_plain:>8.0%} {r['plain_copy_one_thread_gbps']:>9.2f} "
              f"{slower / r['plain_copy_one_thread_gbps']:>5.0%}")
    threads = rows[0]["copy_threads"] if rows else 0
    print("target: >= 70% of the plain copy for blocks >= 256 KiB: "
          f"{'missed at ' + ', '.join(short) if short else 'met'} "
          f"(the handler split each job over {threads} copy thread(s); "
          "vs plain: the slower of store and load; 1T: a one-thread plain "
          "copy)")
