"""`make bench LINE=0.32.0 B=fleet`: three `vllm serve` processes behind a
round-robin client, sharing one `fs` tier root, against the same three with
a CPU tier each and nothing shared.

The workload: NUM_DOCUMENTS long documents, each asked one short question
per server (as behind a load balancer that knows nothing of the KV cache);
prompt k goes to server k mod 3, each server takes its questions in an
order of its own. With CPU tiers only, every server computes every
document: three times per document. Sharing the fs tier, a document
computed by one server is loaded by the others: once per document, more
when another server asks before the first one's stores reached the fs
tier. The documents are long and OUTPUT_TOKENS is short, as in a
retrieval workload: the prompts' prefill is most of the work. (With
documents of 1000 tokens, decode and each request's fixed cost weighed a
third of the prefills on this CPU, and the shared tier gained 1.74-1.89x:
docs/benchmarks.md.)

Each round starts both fleets afresh (empty tiers, a new root), one after
the other, their order alternating between rounds; the round with the
median throughput of each fleet is printed, beside the target (issue 35:
at least 2x the throughput of the CPU tiers only).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import tempfile
from pathlib import Path

from ...core.errors import progress
from ...core.line import Line
from ..tiny_models import generate
from . import round_robin, serving
from .charts import write_fleet_chart

NUM_SERVERS = 3
# 24,000 tokens of documents (a word is about a token): the CPU tier holds
# them all.
NUM_DOCUMENTS = 8
DOCUMENT_WORDS = 3000
QUESTIONS_PER_DOCUMENT = NUM_SERVERS
OUTPUT_TOKENS = 8
# About one request in flight per server.
NUM_CLIENTS = NUM_SERVERS
ROUNDS = 3
# The serving benchmark's servers, with room for a document and its
# question, and a KV cache of one such prompt.
MAX_MODEL_LEN = 4096
SETUP = dataclasses.replace(serving.UPSTREAM_OFFLOADING,
                            max_model_len=MAX_MODEL_LEN,
                            kv_cache_tokens=MAX_MODEL_LEN + 32)
THROUGHPUT_TARGET = 2.0
FLEETS = ("CPU tiers only", "shared fs tier")


def prompts() -> list[str]:
    """The workload's prompts in the order they are sent: prompt k is
    asked of server k mod NUM_SERVERS; each server is asked about each
    document QUESTIONS_PER_DOCUMENT / NUM_SERVERS times, in an order of its
    own."""
    rng = random.Random(0)
    documents = [
        serving.random_text(rng, DOCUMENT_WORDS) for _ in range(NUM_DOCUMENTS)
    ]
    per_server: list[list[str]] = [[] for _ in range(NUM_SERVERS)]
    for document in documents:
        for q in range(QUESTIONS_PER_DOCUMENT):
            per_server[q % NUM_SERVERS].append(
                f"{document}\nQuestion {q}: {serving.random_text(rng, 8)}?")
    for asked in per_server:
        rng.shuffle(asked)
    return [prompt for turn in zip(*per_server) for prompt in turn]


def kv_transfer_config(model: str, fs_root: Path | None) -> dict:
    """The serving benchmark's CPU tier; with fs_root, an fs tier below it
    (upstream's TieringOffloadingSpec)."""
    config = SETUP.offloading(model)
    if fs_root is not None:
        config["kv_connector_extra_config"].update(
            spec_name="TieringOffloadingSpec",
            secondary_tiers=[{
                "type": "fs",
                "root_dir": str(fs_root)
            }])
    return config


def server_env() -> dict[str, str]:
    # One OpenMP thread per engine, not bound: the kernel spreads the three
    # engines over the machine's cores alike in both fleets.
    env = serving.server_env(SETUP)
    env["VLLM_CPU_OMP_THREADS_BIND"] = "nobind"
    return env


def run_fleet(layout: Line, model: str, fleet: str, round_number: int,
              workload: list[str]) -> dict:
    """Start the fleet, warm each server up, run the workload; its figures."""
    out = layout.build / "bench-fleet"
    out.mkdir(parents=True, exist_ok=True)
    setup = SETUP
    with contextlib.ExitStack() as stack:
        fs_root = None
        if fleet == "shared fs tier":
            fs_root = Path(
                stack.enter_context(
                    tempfile.TemporaryDirectory(prefix="fleet-fs-",
                                                dir=layout.build)))
        config = kv_transfer_config(model, fs_root)
        progress(f"fleet: round {round_number + 1}/{ROUNDS}, {fleet}: "
                 f"starting {NUM_SERVERS} vllm serve")
        logs = [
            out / f"{fleet.replace(' ', '-')}-{server}.log"
            for server in range(NUM_SERVERS)
        ]
        urls = stack.enter_context(
            serving.served_together(setup, model, server_env(), logs, config))
        # The first requests of a server pay for one-time setup.
        warm_up = [f"warm up {i}" for i in range(NUM_SERVERS)]
        round_robin.run(urls, model, warm_up, 1, NUM_SERVERS)
        before = [serving.tier_counters(setup, url) for url in urls]
        progress(f"fleet: round {round_number + 1}/{ROUNDS}, {fleet}: "
                 f"{len(workload)} prompts")
        result = round_robin.run(urls, model, workload, OUTPUT_TOKENS,
                                 NUM_CLIENTS)
        after = [serving.tier_counters(setup, url) for url in urls]
    hits = sum(a[0] - b[0] for a, b in zip(after, before))
    lookups = sum(a[1] - b[1] for a, b in zip(after, before))
    return {
        "fleet": fleet,
        "round": round_number,
        "output_throughput": result.output_throughput,
        "ttft_p50_s": result.ttft_percentile(50),
        "ttft_p99_s": result.ttft_percentile(99),
        "duration_s": result.duration_s,
        "hit_rate": hits / lookups if lookups else 0.0,
    }


def median_round(rows: list[dict], fleet: str) -> dict:
    runs = sorted((r for r in rows if r["fleet"] == fleet),
                  key=lambda r: r["output_throughput"])
    return runs[len(runs) // 2]


def run(layout: Line) -> None:
    print(
        f"\n## A fleet of {NUM_SERVERS} `vllm serve` behind a round-robin "
        f"client: CPU tiers only vs one shared fs tier (vLLM's CPU platform, "
        f"bench-llama fp32, engines not bound to cores on "
        f"{len(os.sched_getaffinity(0))} cores; {NUM_DOCUMENTS} documents of "
        f"~{DOCUMENT_WORDS} words x {QUESTIONS_PER_DOCUMENT} questions, "
        f"one per server, {NUM_CLIENTS} clients, {OUTPUT_TOKENS} output "
        "tokens; "
        f"median of {ROUNDS} rounds)",
        flush=True)
    model = str(generate("bench-llama"))
    workload = prompts()
    rows = []
    for round_number in range(ROUNDS):
        order = FLEETS if round_number % 2 == 0 else FLEETS[::-1]
        for fleet in order:
            rows.append(run_fleet(layout, model, fleet, round_number,
                                  workload))
    medians = [median_round(rows, fleet) for fleet in FLEETS]
    print(f"{'fleet':>15} {'out tok/s':>10} {'TTFT p50 s':>11} "
          f"{'TTFT p99 s':>11} {'tier hit rate':>14} {'rounds tok/s':>16}")
    for r in medians:
        each = ", ".join(f"{x['output_throughput']:.1f}" for x in rows
                         if x["fleet"] == r["fleet"])
        print(f"{r['fleet']:>15} {r['output_throughput']:>10.2f} "
              f"{r['ttft_p50_s']:>11.3f} {r['ttft_p99_s']:>11.3f} "
              f"{r['hit_rate'] * 100:>13.1f}% {each:>16}")
    cpu_only, shared = medians
    speedup = shared["output_throughput"] / cpu_only["output_throughput"]
    ttft = cpu_only["ttft_p50_s"] / shared["ttft_p50_s"]
    print(f"shared fs tier / CPU tiers only = {speedup:.2f}x throughput "
          f"(target >= {THROUGHPUT_TARGET:.0f}x: "
          f"{'met' if speedup >= THROUGHPUT_TARGET else 'NOT met'}), "
          f"TTFT p50 {ttft:.1f}x lower; at most "
          f"{1 - 1 / QUESTIONS_PER_DOCUMENT:.0%} of the prompts can hit with "
          f"the fs tier shared, "
          f"{1 - NUM_SERVERS / QUESTIONS_PER_DOCUMENT:.0%} without")
    chart = layout.docs / "img" / f"fleet-{layout.pin.version}.png"
    write_fleet_chart(
        medians, f"{NUM_SERVERS} vllm serve, round-robin client, vLLM's CPU "
        f"platform, bench-llama fp32 (make bench LINE={layout.version} "
        "B=fleet)", chart)
    print(f"chart: {chart.relative_to(layout.root)} (throughput and TTFT p50 "
          "of each fleet)")
    print("rounds: " + "; ".join(
        f"{r['round'] + 1} {r['fleet']} {r['output_throughput']:.1f} tok/s "
        f"in {r['duration_s']:.0f} s" for r in rows))
