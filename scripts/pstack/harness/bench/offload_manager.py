"""The series' CPU offloading managers (LRU, ARC) against upstream's
pure-Python ones, on identical hash streams, with the targets of issue 13.

Upstream's managers come from the released vLLM wheel of UPSTREAM_VERSION
(the last release with the pure-Python LRU and ARC managers and their
Backend, before the 2026 refactor): the wheel is downloaded through pip's
index into the cache, checked against the sha256 the index publishes, and
the manager files are extracted into build/ at run time, never into the
repository. Their imports of `vllm.v1.kv_offload` are pointed at the
package they are extracted as, `upstream_kv_offload`.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from ...core.download import fetch, find_release
from ...core.errors import progress
from ...core.line import Line
from .runner import run_script

UPSTREAM_VERSION = "0.13.0"
UPSTREAM_PACKAGE = "upstream_kv_offload"
UPSTREAM_FILES = ("__init__.py", "abstract.py", "backend.py", "mediums.py",
                  "lru_manager.py", "arc_manager.py", "backends/__init__.py",
                  "backends/cpu.py")
TARGETS = {"LRU": 1.5, "ARC": 1.0}


def upstream_managers(layout: Line) -> Path:
    """A directory holding upstream's managers as UPSTREAM_PACKAGE."""
    dest = layout.build / f"upstream-kv-offload-{UPSTREAM_VERSION}"
    package = dest / UPSTREAM_PACKAGE
    if all((package / name).exists() for name in UPSTREAM_FILES):
        return dest
    release = find_release(UPSTREAM_VERSION, like=layout.pin)
    wheel = fetch(release.wheel, release.wheel_sha256, layout.cache)
    progress(f"extracting upstream's managers from {wheel.name}")
    with zipfile.ZipFile(wheel) as archive:
        for name in UPSTREAM_FILES:
            text = archive.read(f"vllm/v1/kv_offload/{name}").decode()
            target = package / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(
                text.replace("vllm.v1.kv_offload", UPSTREAM_PACKAGE))
    return dest


def run(layout: Line) -> None:
    upstream = upstream_managers(layout)
    print(
        f"\n## Offloading managers: the series vs upstream {UPSTREAM_VERSION}"
        " (pure Python), identical hash streams")
    print("Per request: lookup, prepare_load + complete_load of the hits, "
          "prepare_store of the rest, complete_store, touch. Block "
          "operations: blocks passed to manager calls. The managers take "
          "turns on the stream; x upstream is the median over rounds.")
    rows = run_script(layout, "measure_offload_manager.py", layout.src,
                      "--upstream", str(upstream))
    rows += run_script(layout,
                       "measure_offload_manager.py", layout.src, "--upstream",
                       str(upstream), "--keys", "tuple", "--workload", "reuse",
                       "--rounds", "2")
    _print_reuse(rows)
    _print_pool(rows)
    _print_pinned(rows)


def _print_reuse(rows: list[dict]) -> None:
    reuse = [r for r in rows if r["workload"] == "reuse"]
    if not reuse:
        return
    first = reuse[0]
    print(f"\n{first['requests']:,} requests x 64 blocks, pool of "
          f"{first['pool']:,} blocks")
    print(f"{'keys':>6} {'manager':>13} {'M block-ops/s':>14} "
          f"{'x upstream':>11} {'hit rate':>9}")
    for r in reuse:
        print(f"{r['keys']:>6} {r['manager']:>13} {r['mops']:>14.2f} "
              f"{r['vs_first']:>11.2f} {r['hit_rate']:>9.1%}")
    for policy, target in TARGETS.items():
        row = next(
            r for r in reuse
            if r["manager"] == f"series {policy}" and r["keys"] == "bytes")
        met = "met" if row["vs_first"] >= target else "NOT met"
        print(f"target: series {policy} >= {target}x upstream's "
              f"(32-byte keys, upstream's key type): {row['vs_first']:.2f}x,"
              f" {met}")


def _print_pool(rows: list[dict]) -> None:
    pool = [r for r in rows if r["workload"] == "pool"]
    if not pool:
        return
    print("\nCost per block operation on a full pool of 10,000 and "
          "1,000,000 blocks (same stream)")
    print(f"{'manager':>13} {'ns (10k)':>9} {'ns (1M)':>9} {'1M / 10k':>9}")
    for name in dict.fromkeys(r["manager"] for r in pool):
        by_size = {
            r["pool"]: 1e3 / r["mops"]
            for r in pool if r["manager"] == name
        }
        small, large = by_size[10_000], by_size[1_000_000]
        print(f"{name:>13} {small:>9.0f} {large:>9.0f} "
              f"{large / small:>9.2f}")


def _print_pinned(rows: list[dict]) -> None:
    pinned = [r for r in rows if r["workload"] == "pinned"]
    if not pinned:
        return
    print("\nprepare_store + complete_store of 16 new blocks into a full pool "
          "of 100,000 blocks, µs per call: nothing pinned, and the 90% least "
          "recently used blocks held by loads in flight")
    print(f"{'manager':>13} {'0% pinned':>10} {'90% pinned':>11} "
          f"{'slowdown':>9}")
    for name in dict.fromkeys(r["manager"] for r in pinned):
        by_fraction = {
            r["pinned_fraction"]: r["us_per_store"]
            for r in pinned if r["manager"] == name
        }
        free, held = by_fraction[0.0], by_fraction[0.9]
        print(f"{name:>13} {free:>10.1f} {held:>11.1f} {held / free:>8.1f}x")
