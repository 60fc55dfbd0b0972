"""Offline generation throughput of the CPU engine, without a KV connector.

Run with PYTHONPATH pointing at a vLLM tree (the unpatched base or the series)
and the engine in process; prints one JSON line per timed repeat:

    PYTHONPATH=/path/to/vllm python measure_engine_throughput.py MODEL_DIR \
        [--repeats N]

Each repeat generates GEN_LEN tokens (ignore_eos) for a batch of NUM_PROMPTS
prompts of PROMPT_LEN random token ids. Prompts differ between repeats (and
are the same for every tree), so nothing hits the prefix cache: the figure is
prefill + decode with the default prefix caching on, which the series'
request-owned block hashes take part in.
"""

from __future__ import annotations

import argparse
import json
import time

from offline_engine import make_llm, random_prompts

NUM_PROMPTS = 8
PROMPT_LEN = 128
GEN_LEN = 64


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from vllm import SamplingParams
    llm = make_llm(args.model)
    vocab = len(llm.get_tokenizer())
    params = SamplingParams(temperature=0.0,
                            max_tokens=GEN_LEN,
                            ignore_eos=True)

    def generate(seed: int) -> tuple[float, float]:
        batch = random_prompts(seed, vocab, NUM_PROMPTS, PROMPT_LEN)
        start, start_cpu = time.perf_counter(), time.process_time()
        outs = llm.generate(batch, params, use_tqdm=False)
        elapsed, cpu = time.perf_counter() - start, time.process_time(
        ) - start_cpu
        assert all(len(o.outputs[0].token_ids) == GEN_LEN for o in outs)
        return elapsed, cpu

    generate(1000)  # warm-up: first-call allocations, thread pools
    for r in range(args.repeats):
        elapsed, cpu = generate(r)
        # CPU time of this process: with one OpenMP thread it is the work
        # done, much less disturbed than wall time when the machine is shared.
        print(json.dumps({
            "repeat":
            r,
            "seconds":
            round(elapsed, 4),
            "cpu_seconds":
            round(cpu, 4),
            "output_tok_per_s":
            NUM_PROMPTS * GEN_LEN / elapsed,
            "output_tok_per_cpu_s":
            NUM_PROMPTS * GEN_LEN / cpu,
            "total_tok_per_s":
            NUM_PROMPTS * (PROMPT_LEN + GEN_LEN) / elapsed
        }),
              flush=True)


if __name__ == "__main__":
    main()
