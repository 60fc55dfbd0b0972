"""`make bench B=serving`: what offloading buys behind `vllm serve`.

First the time to first token by prompt length (ttft.py), drawn as
docs/img/ttft-by-prompt-length.png. Then

vLLM's own benchmarks/benchmark_serving.py (from vllm-src) drives `vllm serve`
without and with the OffloadingConnector, both servers up side by side, on
two workloads of the same prompt lengths:
  reuse     documents asked about several times in shuffled order; together
            they are several times the GPU KV cache, so most repeats find
            their document evicted from the GPU prefix cache. Run once per
            server, first, while the CPU tier is empty;
  no reuse  every prompt new: what offloading costs when it cannot help.
            NO_REUSE_ROUNDS rounds, each with prompts of its own, the two
            servers taking turns; the ratio is the median over rounds.
The CPU-tier hit rate is read from the server's /metrics.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ...core.errors import UserError, progress
from ...core.line import Line
from ..testenv import ENGINE_ENV
from ..tiny_models import generate
from . import ttft
from .charts import write_ttft_chart

# The servers' longest prompt (a document and a question, with room).
MAX_MODEL_LEN = 2048
# The CPU tier: 32,768 tokens, every document's KV several times over.
CPU_TIER_TOKENS = 32768
NUM_DOCUMENTS = 12
DOCUMENT_WORDS = 1000
QUESTIONS_PER_DOCUMENT = 4
NO_REUSE_ROUNDS = 3
OUTPUT_TOKENS = 16
MAX_CONCURRENCY = 2


@dataclass(frozen=True)
class Setup:
    """What a line's servers and benchmark client need: the series'
    connector (vLLM 0.9.2, 0.10.2) or upstream's offloading (0.32)."""

    block_size: int
    # The KV cache, in tokens: the 0.9.2 line's one and a half documents;
    # vLLM 0.32 refuses a KV cache smaller than the longest prompt.
    kv_cache_tokens: int
    # The connector's kv_connector_extra_config, for a model dir.
    extra_config: Callable[[str], dict]
    server_flags: tuple[str, ...]
    # The client's argv after the interpreter, for the line's tree.
    client: Callable[[Line], list[str]]
    skip_chat_template: str
    # Counters of (tokens hit, tokens looked up) in the CPU tier.
    hit_metrics: tuple[str, str]
    label: str
    # What the servers' environment adds to the engine's.
    server_env: tuple[tuple[str, str], ...] = ()
    # The servers' --max-model-len.
    max_model_len: int = MAX_MODEL_LEN

    @property
    def num_gpu_blocks(self) -> int:
        return self.kv_cache_tokens // self.block_size

    def offloading(self, model: str) -> dict:
        return {
            "kv_connector": "OffloadingConnector",
            "kv_role": "kv_both",
            "kv_connector_extra_config": self.extra_config(model),
        }


def kv_bytes_per_token(model: str) -> int:
    """float32 K and V of every layer, from the model's config.json."""
    config = json.loads((Path(model) / "config.json").read_text())
    head_size = config.get("head_dim") or (config["hidden_size"] //
                                           config["num_attention_heads"])
    return (2 * config["num_hidden_layers"] * config["num_key_value_heads"] *
            head_size * 4)


SERIES_CONNECTOR = Setup(
    block_size=16,
    kv_cache_tokens=1536,
    extra_config=lambda model: {"num_cpu_blocks": CPU_TIER_TOKENS // 16},
    # vLLM 0.9.2 logs every request unless told not to.
    server_flags=("--disable-log-requests", ),
    client=lambda layout:
    [str(layout.src / "benchmarks" / "benchmark_serving.py")],
    skip_chat_template="--custom-skip-chat-template",
    hit_metrics=("vllm:kv_offload_hit_tokens_total",
                 "vllm:kv_offload_lookup_tokens_total"),
    label="benchmark_serving.py; CPU engine, bench-llama fp32")
UPSTREAM_OFFLOADING = Setup(
    # vLLM 0.32's CPU attention wants blocks of a multiple of 32 tokens.
    block_size=32,
    # (and keeps one block of the KV cache out of use).
    kv_cache_tokens=MAX_MODEL_LEN + 32,
    extra_config=lambda model:
    {"cpu_bytes_to_use": CPU_TIER_TOKENS * kv_bytes_per_token(model)},
    server_flags=(),
    client=lambda layout:
    ["-m", "vllm.entrypoints.cli.main", "bench", "serve"],
    skip_chat_template="--skip-chat-template",
    hit_metrics=("vllm:external_prefix_cache_hits_total",
                 "vllm:external_prefix_cache_queries_total"),
    label="vllm bench serve; vLLM's CPU platform, bench-llama fp32, "
    "upstream's OffloadingConnector with the line's CPU tier; each server's "
    "worker bound to core 0",
    # vLLM 0.32's CPU worker binds its OpenMP threads to the cores it finds
    # free: the second server started got both cores, the first one.
    server_env=(("VLLM_CPU_OMP_THREADS_BIND", "0"), ))
WORDS = [
    "cache", "block", "layer", "token", "prefix", "offload", "memory", "copy",
    "store", "load", "tier", "engine", "request", "model", "batch", "step",
    "worker", "query", "key", "value", "head", "page", "hit", "miss", "evict",
    "red", "green", "blue", "river", "stone", "cloud", "light", "paper",
    "number", "answer", "question"
]


def random_text(rng: random.Random, num_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(num_words))


def write_workloads(out: Path) -> dict[str, list[Path]]:
    """The workloads as benchmark_serving custom datasets (JSONL): one file
    for "reuse", one per round for "no reuse"."""
    rng = random.Random(0)
    documents = [
        random_text(rng, DOCUMENT_WORDS) for _ in range(NUM_DOCUMENTS)
    ]
    reuse = [
        f"{doc}\nQuestion {q}: {random_text(rng, 8)}?" for doc in documents
        for q in range(QUESTIONS_PER_DOCUMENT)
    ]
    paths: dict[str, list[Path]] = {
        "reuse": [_write(out / "reuse.jsonl", reuse)],
        "no reuse": []
    }
    for round_number in range(NO_REUSE_ROUNDS):
        unique = [
            f"{random_text(rng, DOCUMENT_WORDS)}\nQuestion 0: "
            f"{random_text(rng, 8)}?" for _ in reuse
        ]
        paths["no reuse"].append(
            _write(out / f"no-reuse-{round_number}.jsonl", unique))
    return paths


def _write(path: Path, prompts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in prompts))
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def served(setup: Setup, model: str, env: dict[str, str], log: Path,
           kv_transfer_config: dict | None) -> Iterator[str]:
    """`vllm serve model` for the duration of the block; yields its URL."""
    with served_together(setup, model, env, [log],
                         kv_transfer_config) as (url, ):
        yield url


@contextmanager
def served_together(setup: Setup, model: str, env: dict[str,
                                                        str], logs: list[Path],
                    kv_transfer_config: dict | None) -> Iterator[list[str]]:
    """One `vllm serve model` per log file, started at once, for the
    duration of the block; yields their URLs."""
    started: list[subprocess.Popen] = []
    urls: list[str] = []
    try:
        for log in logs:
            proc, url = _start(setup, model, env, log, kv_transfer_config)
            started.append(proc)
            urls.append(url)
        for proc, url, log in zip(started, urls, logs):
            _wait_until_up(proc, url, log)
        yield urls
    finally:
        for proc in started:
            proc.terminate()
        for proc in started:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()


def _start(setup: Setup, model: str, env: dict[str, str], log: Path,
           kv_transfer_config: dict | None) -> tuple[subprocess.Popen, str]:
    """Start `vllm serve model`: its process and URL."""
    port = _free_port()
    args = [
        sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", model,
        "--port",
        str(port), "--dtype", "float32", "--enforce-eager", "--block-size",
        str(setup.block_size), "--num-gpu-blocks-override",
        str(setup.num_gpu_blocks), "--max-model-len",
        str(setup.max_model_len), "--max-num-seqs", "4", "--seed", "0",
        *setup.server_flags
    ]
    if kv_transfer_config is not None:
        args += ["--kv-transfer-config", json.dumps(kv_transfer_config)]
    with open(log, "wb") as out:
        proc = subprocess.Popen(args,
                                env=env,
                                stdout=out,
                                stderr=subprocess.STDOUT)
    return proc, f"http://127.0.0.1:{port}"


def _wait_until_up(proc: subprocess.Popen, url: str, log: Path) -> None:
    deadline = time.monotonic() + 600
    while True:
        if proc.poll() is not None:
            raise UserError(f"vllm serve exited with {proc.returncode}",
                            f"its output is in {log}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise UserError("vllm serve did not start",
                                f"its output is in {log}") from None
            time.sleep(1)


def tier_counters(setup: Setup, url: str) -> tuple[float, float]:
    """(tokens hit, tokens looked up) in the server's CPU tier so far."""
    hits, lookups = setup.hit_metrics
    return _metric(url, hits), _metric(url, lookups)


def _metric(url: str, name: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as response:
        text = response.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
        if line.startswith(name + "{") or line.startswith(name + " "))


def run_benchmark(layout: Line, setup: Setup, url: str, model: str,
                  dataset: Path, env: dict[str, str], result: Path) -> dict:
    num_prompts = len(dataset.read_text().splitlines())
    cmd = [
        sys.executable,
        *setup.client(layout),
        "--backend",
        "vllm",
        "--base-url",
        url,
        "--model",
        model,
        "--dataset-name",
        "custom",
        "--dataset-path",
        str(dataset),
        setup.skip_chat_template,
        "--custom-output-len",
        str(OUTPUT_TOKENS),
        "--ignore-eos",
        "--num-prompts",
        str(num_prompts),
        "--max-concurrency",
        str(MAX_CONCURRENCY),
        "--request-rate",
        "inf",
        # All three: saving the result needs them (benchmark_serving.py of
        # vLLM 0.9.2 fails without tpot and itl).
        "--percentile-metrics",
        "ttft,tpot,itl",
        "--metric-percentiles",
        "50,99",
        "--save-result",
        "--result-dir",
        str(result.parent),
        "--result-filename",
        result.name,
        "--seed",
        "0"
    ]
    proc = subprocess.run(cmd,
                          env=env,
                          cwd=layout.src,
                          text=True,
                          stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        print(proc.stdout[-3000:], file=sys.stderr)
        raise UserError(
            f"the benchmark client failed with exit status {proc.returncode} "
            "(the end of its output is above)",
            f"run it alone: cd {layout.src} && {' '.join(cmd)}")
    return json.loads(result.read_text())


def chart_file(layout: Line) -> Path:
    return layout.docs / "img" / "ttft-by-prompt-length.png"


def run(layout: Line) -> None:
    ttft_rows = ttft.run(layout)
    run_workloads(layout, SERIES_CONNECTOR)
    draw_chart(layout, ttft_rows)


def run_workloads(layout: Line, setup: Setup) -> None:
    """Both workloads on both servers, printed with the targets."""
    print_header(setup)
    model = str(generate("bench-llama"))
    out = layout.build / "bench-serving"
    out.mkdir(parents=True, exist_ok=True)
    results = measure(layout, setup, model, write_workloads(out), out)
    rows = median_rows(results)
    print_table(rows)
    print_ratios(rows, results)


def print_header(setup: Setup) -> None:
    print(
        "\n## vllm serve without and with the OffloadingConnector "
        f"({setup.label}; "
        f"{NUM_DOCUMENTS} documents of ~{DOCUMENT_WORDS} words x "
        f"{QUESTIONS_PER_DOCUMENT} questions, GPU KV cache "
        f"{setup.kv_cache_tokens} tokens, {MAX_CONCURRENCY} clients, "
        f"{OUTPUT_TOKENS} output tokens)",
        flush=True)


def server_env(setup: Setup) -> dict[str, str]:
    """The servers' environment: the engine's offline settings, the engine
    core in a process of its own."""
    env = {**os.environ, **ENGINE_ENV, **dict(setup.server_env)}
    env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
    return env


def turns(servers: list[str]) -> list[tuple[str, int, list[str]]]:
    """(workload, round, servers in the order they run it): "reuse" once,
    then each "no reuse" round, the order reversed every other round.

    >>> turns(["a", "b"])[0]
    ('reuse', 0, ['a', 'b'])
    >>> turns(["a", "b"])[1:3]
    [('no reuse', 0, ['b', 'a']), ('no reuse', 1, ['a', 'b'])]
    """
    no_reuse = [("no reuse", r, list(servers)[::1 if r % 2 else -1])
                for r in range(NO_REUSE_ROUNDS)]
    return [("reuse", 0, list(servers)), *no_reuse]


def measure(layout: Line, setup: Setup, model: str,
            workloads: dict[str, list[Path]],
            out: Path) -> dict[tuple[str, str], list[dict]]:
    """Both servers up side by side, each workload round run against each;
    per (workload, server) the result of each round."""
    env = server_env(setup)
    configs = {"no connector": None, "offloading": setup.offloading(model)}
    results: dict[tuple[str, str], list[dict]] = {}
    with contextlib.ExitStack() as servers:
        urls = {}
        for name, config in configs.items():
            progress(f"serving: starting vllm serve, {name}")
            urls[name] = servers.enter_context(
                served(setup, model, env,
                       out / f"{name.replace(' ', '-')}.log", config))
        for workload, round_number, order in turns(list(configs)):
            dataset = workloads[workload][round_number]
            for name in order:
                progress(f"serving: {workload} round {round_number + 1}, "
                         f"{name}")
                tag = f"{dataset.stem}-{name.replace(' ', '-')}"
                result = benchmark_with_hit_rate(layout, setup, urls[name],
                                                 model, dataset, env,
                                                 out / f"{tag}.json")
                results.setdefault((workload, name), []).append(result)
    return results


def benchmark_with_hit_rate(layout: Line, setup: Setup, url: str, model: str,
                            dataset: Path, env: dict[str, str],
                            result: Path) -> dict:
    """benchmark_serving.py's result, with the server's CPU-tier hit rate
    during the run (None: no lookups)."""
    before = tier_counters(setup, url)
    data = run_benchmark(layout, setup, url, model, dataset, env, result)
    hits, lookups = (
        after - first
        for after, first in zip(tier_counters(setup, url), before))
    data["hit_rate"] = hits / lookups if lookups else None
    return data


def median_rows(results: dict[tuple[str, str], list[dict]]) -> list[dict]:
    """Per (workload, server), the round with the median throughput."""
    rows = []
    for (workload, name), runs in results.items():
        by_throughput = sorted(runs, key=lambda r: r["output_throughput"])
        rows.append({
            "workload": workload,
            "server": name,
            **by_throughput[len(runs) // 2]
        })
    return rows


def print_table(rows: list[dict]) -> None:
    print(f"{'workload':>9} {'server':>13} {'TTFT p50 ms':>12} "
          f"{'TTFT p99 ms':>12} {'out tok/s':>10} {'CPU-tier hit rate':>18}")
    for r in rows:
        hit_rate = ("-" if r["hit_rate"] is None else
                    f"{r['hit_rate'] * 100:.1f}%")
        print(f"{r['workload']:>9} {r['server']:>13} "
              f"{r['p50_ttft_ms']:>12.0f} {r['p99_ttft_ms']:>12.0f} "
              f"{r['output_throughput']:>10.2f} {hit_rate:>18}")


def print_ratios(rows: list[dict], results: dict[tuple[str, str],
                                                 list[dict]]) -> None:
    """Throughput with the connector over without, against the targets."""
    by = {(r["workload"], r["server"]): r["output_throughput"] for r in rows}
    reuse = by["reuse", "offloading"] / by["reuse", "no connector"]
    # The ratio of the median rounds is the steady figure; the ratio within
    # each round (the servers took turns) shows the spread.
    no_reuse = by["no reuse", "offloading"] / by["no reuse", "no connector"]
    no_reuse_rounds = [
        with_connector["output_throughput"] / without["output_throughput"]
        for with_connector, without in zip(results["no reuse", "offloading"],
                                           results["no reuse", "no connector"])
    ]
    print(f"reuse: offloading / no connector = {reuse:.2f}x throughput "
          f"(target >= 2x: {'met' if reuse >= 2 else 'NOT met'}; at most "
          f"{1 - 1 / QUESTIONS_PER_DOCUMENT:.0%} of prompts can hit: the "
          "first question of each document is computed)")
    print(f"no reuse: offloading / no connector = {no_reuse:.3f}x throughput "
          f"(per round "
          f"{', '.join(f'{r:.3f}' for r in no_reuse_rounds)}; target >= "
          f"0.98x: {'met' if no_reuse >= 0.98 else 'NOT met'})")
    print("no reuse: TTFT, throughput and hit rate of the median round")


def draw_chart(layout: Line, ttft_rows: list[dict]) -> None:
    chart = chart_file(layout)
    write_ttft_chart(
        ttft_rows, "Time to first token, CPU engine, bench-llama fp32 "
        "(make bench B=serving)", chart)
    print(f"chart: {chart.relative_to(layout.root)} (TTFT by prompt length: "
          "recomputed, CPU-tier hit, GPU hit)")
