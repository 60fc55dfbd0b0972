"""`make bench`: the project's benchmarks, printed as tables.

Figures are printed, never asserted: they depend on the machine. Benchmarks
that compare against the unpatched base run the same script against a
worktree of vllm-src at the base tag (build/vllm-base).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .common import REPO, BasePin, Paths
from .srctree import scratch_worktree

BENCH_DIR = REPO / "scripts" / "benchmarks"


def base_tree(paths: Paths) -> Path:
    """The unpatched base, to run the same benchmark before and after."""
    return scratch_worktree(paths, "vllm-base", BasePin.load(paths.base_file).tag)


def run_script(script: str, tree: Path, *args: str) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(tree), "VLLM_LOGGING_LEVEL": "ERROR"}
    proc = subprocess.run([sys.executable, str(BENCH_DIR / script), *args], env=env,
                          cwd=REPO / "build", text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    if proc.returncode != 0:
        raise SystemExit(f"{script} failed:\n{proc.stderr[-3000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def bench_block_hashing(paths: Paths) -> None:
    print("\n## Block hashing on the decode path (append + allocate_slots), "
          "µs per generated token, prompt 512, block 16")
    base = run_script("block_hashing.py", base_tree(paths))
    patched = run_script("block_hashing.py", paths.src)
    print(f"{'generated':>10} {'v0.9.2':>10} {'series':>10}")
    for b, p in zip(base, patched):
        print(f"{b['generated_tokens']:>10} {b['us_per_token']:>10.2f} "
              f"{p['us_per_token']:>10.2f}")
    growth = patched[-1]["us_per_token"] / patched[0]["us_per_token"]
    print(f"series: cost per token at {patched[-1]['generated_tokens']} vs "
          f"{patched[0]['generated_tokens']} generated tokens: {growth:.2f}x "
          "(flat = amortized O(new blocks))")


def bench_offload_manager(paths: Paths) -> None:
    print("\n## Offloading manager on a full pool of 1M CPU blocks "
          "(lookup + prepare_store + complete_store + touch, 16 blocks per call)")
    rows = run_script("offload_manager.py", paths.src)
    print(f"{'policy':>8} {'ops/s':>10} {'blocks/s':>10} {'fill 1M (s)':>12}")
    for r in rows:
        print(f"{r['policy']:>8} {r['ops_per_s']:>10,} {r['blocks_per_s']:>10,} "
              f"{r['fill_seconds']:>12.1f}")


def bench_transfer(paths: Paths) -> None:
    print("\n## CPU-platform offloading handler: 256 MiB of shuffled blocks stored "
          "and loaded back, vs one plain tensor.copy_ of 256 MiB (GB/s, best of 5)")
    rows = run_script("transfer.py", paths.src)
    print(f"{'block':>8} {'store':>7} {'load':>7} {'plain':>7} {'vs plain':>9}")
    for r in rows:
        ratio = min(r["store_gbps"], r["load_gbps"]) / r["plain_copy_gbps"]
        print(f"{r['block_kib']:>6}Ki {r['store_gbps']:>7.2f} {r['load_gbps']:>7.2f} "
              f"{r['plain_copy_gbps']:>7.2f} {ratio:>8.0%}")
    print("target: >= 70% of the plain copy for blocks >= 256 KiB")


def bench_cross_layer(paths: Paths) -> None:
    print("\n## Per-layer vs cross-layer KV blocks on the CPU platform: one 2048-token "
          "request (128 blocks of 16 tokens, bf16, shuffled) stored and loaded back")
    rows = run_script("cross_layer.py", paths.src)
    print(f"{'model shape':>12} {'layout':>12} {'copies/block':>13} {'bytes/copy':>11} "
          f"{'MiB':>6} {'store ms':>9} {'load ms':>8}")
    for r in rows:
        print(f"{r['shape']:>12} {r['layout']:>12} {r['copies_per_block']:>13} "
              f"{r['bytes_per_copy']:>11,} {r['request_mib']:>6.1f} {r['store_ms']:>9.2f} "
              f"{r['load_ms']:>8.2f}")
    by_key = {(r["shape"], r["layout"]): r for r in rows}
    for shape in dict.fromkeys(r["shape"] for r in rows):
        per, cross = by_key[(shape, "per-layer")], by_key[(shape, "cross-layer")]
        print(f"{shape}: cross-layer store {per['store_ms'] / cross['store_ms']:.1f}x, "
              f"load {per['load_ms'] / cross['load_ms']:.1f}x faster")


BENCHMARKS = {"block-hashing": bench_block_hashing,
              "offload-manager": bench_offload_manager,
              "transfer": bench_transfer,
              "cross-layer": bench_cross_layer}


def main(argv: list[str]) -> int:
    paths = Paths.default()
    (REPO / "build").mkdir(exist_ok=True)
    for name in argv or list(BENCHMARKS):
        if name not in BENCHMARKS:
            raise SystemExit(f"unknown benchmark {name!r}; choose from {', '.join(BENCHMARKS)}")
        BENCHMARKS[name](paths)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
