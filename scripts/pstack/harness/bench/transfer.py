"""GB/s of the CPU-platform offloading handler storing and loading shuffled
blocks, against a plain copy."""

from __future__ import annotations

from ...core.line import Line
from .runner import run_script


def run(layout: Line) -> None:
    print("\n## CPU-platform offloading handler: 256 MiB of shuffled blocks "
          "stored and loaded back, vs one plain tensor.copy_ of 256 MiB "
          "(GB/s, best of 5; run side by side)")
    rows = run_script(layout, "measure_transfer.py", layout.src)
    print(f"{'block':>8} {'store':>7} {'load':>7} {'plain':>7} "
          f"{'vs plain':>9} {'plain 1T':>9} {'vs 1T':>6}")
    missed = []
    for r in rows:
        slower = min(r["store_gbps"], r["load_gbps"])
        target = _target(r["block_kib"])
        if target is not None and r["vs_plain"] < target:
            missed.append(f"{r['block_kib']} KiB")
        print(f"{r['block_kib']:>6}Ki {r['store_gbps']:>7.2f} "
              f"{r['load_gbps']:>7.2f} {r['plain_copy_gbps']:>7.2f} "
              f"{r['vs_plain']:>8.0%} {r['plain_copy_one_thread_gbps']:>9.2f} "
              f"{slower / r['plain_copy_one_thread_gbps']:>5.0%}")
    threads = rows[0]["copy_threads"] if rows else 0
    verdict = f"missed at {', '.join(missed)}" if missed else "met"
    print("targets: >= 80% of the plain copy for blocks >= 256 KiB, >= 60% "
          f"for 16-64 KiB: {verdict}"
          f" (the handler split each job over {threads} copy thread(s); vs "
          "plain: the median over repetitions of the slower of store and "
          "load against the plain copy timed next to them; 1T: a one-thread "
          "plain copy)")


def _target(block_kib: int) -> float | None:
    """The fraction of a plain copy the handler should reach."""
    if block_kib >= 256:
        return 0.8
    if block_kib >= 16:
        return 0.6
    return None
