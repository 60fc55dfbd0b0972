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

from .common import REPO, BasePin, Paths, progress
from .srctree import scratch_worktree

BENCH_DIR = REPO / "scripts" / "benchmarks"
# Engine benchmarks: engine in process, offline, bench-llama. One OpenMP
# thread: on 2 shared cores the default (one per core) spins in barriers and
# makes every decode step ~10x slower.
ENGINE_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1",
              "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
              "DO_NOT_TRACK": "1", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}


def base_tree(paths: Paths) -> Path:
    """The unpatched base, to run the same benchmark before and after."""
    return scratch_worktree(paths, "vllm-base", BasePin.load(paths.base_file).tag)


def run_script(script: str, tree: Path, *args: str, env: dict | None = None,
               pythonpath: tuple[Path, ...] = ()) -> list[dict]:
    env = {**os.environ, **(env or {}), "VLLM_LOGGING_LEVEL": "ERROR",
           "PYTHONPATH": os.pathsep.join(map(str, (tree, *pythonpath)))}
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
    print(f"{'block':>8} {'store':>7} {'load':>7} {'plain':>7} {'vs plain':>9} "
          f"{'plain 1T':>9} {'vs 1T':>6}")
    short = []
    for r in rows:
        slower = min(r["store_gbps"], r["load_gbps"])
        vs_plain = slower / r["plain_copy_gbps"]
        if r["block_kib"] >= 256 and vs_plain < 0.7:
            short.append(f"{r['block_kib']} KiB")
        print(f"{r['block_kib']:>6}Ki {r['store_gbps']:>7.2f} {r['load_gbps']:>7.2f} "
              f"{r['plain_copy_gbps']:>7.2f} {vs_plain:>8.0%} "
              f"{r['plain_copy_one_thread_gbps']:>9.2f} "
              f"{slower / r['plain_copy_one_thread_gbps']:>5.0%}")
    threads = rows[0]["copy_threads"] if rows else 0
    print(f"target: >= 70% of the plain copy for blocks >= 256 KiB: "
          f"{'missed at ' + ', '.join(short) if short else 'met'} "
          f"(the handler split each job over {threads} copy thread(s); "
          "vs plain: the slower of store and load; 1T: a one-thread plain copy)")


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


def bench_engine_throughput(paths: Paths) -> None:
    from .tiny_models import generate
    rounds = 2
    print("\n## Engine throughput with offloading off, series vs v0.9.2 (CPU engine, "
          "bench-llama fp32; 8 prompts x 128 tokens, 64 generated; "
          f"{rounds} alternating rounds x 3 repeats)", flush=True)
    model = str(generate("bench-llama"))
    trees = {"v0.9.2": base_tree(paths), "series": paths.src}
    results: dict[str, list[dict]] = {name: [] for name in trees}
    for r in range(rounds):
        for name, tree in trees.items():
            progress(f"engine throughput: {name}, round {r + 1}/{rounds}")
            results[name] += run_script("engine_throughput.py", tree, model, env=ENGINE_ENV)
    # Wall time suffers from other load on the machine; the process's CPU
    # time (one OpenMP thread) much less, so its ratio is the steadier one.
    print(f"{'tree':>8} {'out tok/s best':>15} {'median':>8} {'out tok/CPU-s best':>19} "
          f"{'median':>8}")
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
        print(f"series / v0.9.2 ({how}): {cpu:.3f}x per CPU-second, {wall:.3f}x wall")
    print("(target >= 0.98; on a shared machine repeats vary by several %: compare runs)")


def measure_offload_ttft(paths: Paths) -> list[dict]:
    from .tiny_models import generate
    model = str(generate("bench-llama"))
    progress("time to first token: 1k, 2k, 4k-token prompts")
    return run_script("offload_ttft.py", paths.src, model, env=ENGINE_ENV,
                      pythonpath=(REPO / "scripts",))


def bench_offload_ttft(paths: Paths) -> list[dict]:
    print("\n## Time to first token of a long prompt: recomputed vs loaded from the CPU tier "
          "(CPU engine, bench-llama fp32, OffloadingConnector, blocks of 16; best of 2)",
          flush=True)
    rows = measure_offload_ttft(paths)
    print(f"{'prompt':>7} {'recompute s':>12} {'CPU tier s':>11} {'speedup':>8} "
          f"{'loaded tok':>11} {'GPU hit s':>10}")
    for r in rows:
        print(f"{r['prompt_tokens']:>7} {r['cold_s']:>12.3f} {r['cpu_s']:>11.3f} "
              f"{r['cold_s'] / r['cpu_s']:>7.1f}x {r['cpu_loaded_tokens']:>11} "
              f"{r['gpu_s']:>10.3f}")
    return rows


def bench_serving(paths: Paths) -> None:
    from .bench_serving import bench_serving as run
    run(paths, ENGINE_ENV, bench_offload_ttft(paths))


BENCHMARKS = {"block-hashing": bench_block_hashing,
              "offload-manager": bench_offload_manager,
              "transfer": bench_transfer,
              "cross-layer": bench_cross_layer,
              "engine-throughput": bench_engine_throughput,
              "serving": bench_serving}


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
