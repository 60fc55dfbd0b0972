# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""What the OffloadingConnector adds to an engine step when it cannot help.

Run with PYTHONPATH pointing at the series' vLLM tree and the engine in
process (VLLM_ENABLE_V1_MULTIPROCESSING=0); prints one JSON line per timed
repeat:

    python measure_step_overhead.py MODEL_DIR [--connector] [--repeats N]

Each repeat generates GEN_LEN tokens (ignore_eos) for NUM_PROMPTS prompts of
PROMPT_LEN random token ids, different in every repeat: nothing is ever hit,
in the GPU prefix cache or in the CPU tier, so with --connector every full
block is stored for nothing. The engine's step is timed in its two parts
(a profiler of this script's own, wrapping the methods): the scheduler
(Scheduler.schedule and update_from_output, where the scheduler side of
the connector runs) and the worker (the executor's execute_model, where the
worker side of the connector submits and polls its copies).
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict

from offline_engine import make_llm, random_prompts

NUM_PROMPTS = 8
PROMPT_LEN = 512
GEN_LEN = 32
OFFLOADING = {
    "kv_connector": "OffloadingConnector",
    "kv_role": "kv_both",
    "kv_connector_extra_config": {
        "num_cpu_blocks": 4096
    },
}

# Seconds spent in each timed part of the step since the last reset.
SPENT: dict[str, float] = defaultdict(float)
CALLS: dict[str, int] = defaultdict(int)


def timed(obj: object, method: str, part: str) -> None:
    """Count the time of obj.method into SPENT[part]."""
    original = getattr(obj, method)

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            SPENT[part] += time.perf_counter() - start
            CALLS[part] += 1

    setattr(obj, method, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--connector", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from vllm import SamplingParams

    llm = make_llm(args.model, OFFLOADING if args.connector else None)
    engine_core = llm.llm_engine.engine_core.engine_core
    timed(engine_core.scheduler, "schedule", "scheduler")
    timed(engine_core.scheduler, "update_from_output", "scheduler")
    timed(engine_core.model_executor, "execute_model", "worker")
    vocab = len(llm.get_tokenizer())
    params = SamplingParams(temperature=0.0,
                            max_tokens=GEN_LEN,
                            ignore_eos=True)

    def generate(seed: int) -> float:
        batch = random_prompts(seed, vocab, NUM_PROMPTS, PROMPT_LEN)
        start = time.perf_counter()
        outputs = llm.generate(batch, params, use_tqdm=False)
        elapsed = time.perf_counter() - start
        assert all(len(o.outputs[0].token_ids) == GEN_LEN for o in outputs)
        return elapsed

    generate(1000)  # warm-up: first-call allocations, thread pools
    for repeat in range(args.repeats):
        SPENT.clear()
        CALLS.clear()
        # Prompts differ between repeats and from the warm-up: no hits.
        elapsed = generate(repeat)
        steps = CALLS["worker"]
        print(json.dumps({
            "connector": args.connector,
            "repeat": repeat,
            "seconds": elapsed,
            "steps": steps,
            "tok_per_s": NUM_PROMPTS * (PROMPT_LEN + GEN_LEN) / elapsed,
            "scheduler_ms_per_step": SPENT["scheduler"] / steps * 1e3,
            "worker_ms_per_step": SPENT["worker"] / steps * 1e3,
        }),
              flush=True)


if __name__ == "__main__":
    main()
