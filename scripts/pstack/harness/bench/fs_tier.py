"""GB/s of the `fs` tier's loads on a line that carries upstream's
offloading (0.32): FileSystemTierManager loading shuffled blocks into the
CPU tier's buffer, against the filesystem's own sequential read of the same
files into the same places, timed beside them (issue 35's target: at least
80% of it). The read into one block's memory, reused, is printed beside:
the first reference, which also measures the CPU's cache."""

from __future__ import annotations

from ...core.line import Line
from .runner import run_script

TARGET = 0.8


def run(layout: Line) -> None:
    print("\n## fs tier -> CPU tier: 256 MiB of blocks loaded in shuffled "
          "jobs of 16, vs reading the same files one after the other into "
          "the same places (GB/s, median of 5, side by side)")
    directory = layout.build / "fs-tier-bench"
    directory.mkdir(parents=True, exist_ok=True)
    rows = run_script(layout, "measure_fs_tier.py", layout.src, "--dir",
                      str(directory))
    print(f"{'block':>8} {'store':>7} {'load':>7} {'plain':>7} "
          f"{'vs plain':>9} {'target':>7} {'plain*':>7} {'vs plain*':>10}")
    missed = [r for r in rows if r["vs_plain"] < TARGET]
    for r in rows:
        print(f"{r['block_kib']:>6}Ki {r['store_gbps']:>7.2f} "
              f"{r['load_gbps']:>7.2f} {r['plain_read_gbps']:>7.2f} "
              f"{r['vs_plain']:>8.0%} {'>= ' + format(TARGET, '.0%'):>7} "
              f"{r['plain_one_block_gbps']:>7.2f} "
              f"{r['vs_plain_one_block']:>9.0%}")
    if rows:
        first = rows[0]
        print("I/O: " + ("O_DIRECT (no page cache)" if first["o_direct"] else
                         "buffered (the filesystem refuses O_DIRECT)") +
              "; page cache " +
              ("dropped before each pass" if first["page_cache_dropped"] else
               "NOT dropped (not allowed here): buffered reads come from "
               "memory on both sides"))
    print("plain*: the same read with every file into one block's memory, "
          "reused (stays in the CPU's cache: not a target, see "
          "docs/benchmarks.md)")
    verdict = ("missed at " + ", ".join(f"{r['block_kib']} KiB"
                                        for r in missed)) if missed else "met"
    print(f"target: {verdict} (vs plain: the median over repetitions of the "
          "plain read's time over the tier's, one repetition's three passes "
          "back to back)")
