"""Run the real vLLM engine in a child process: JSON spec on stdin, JSON
result on stdout.

Each engine test gets a fresh process, so no engine or torch.distributed state
leaks between tests. The spec:
  {"model": dir, "llm": {LLM kwargs}, "passes": [{"prompts": [...],
   "max_tokens": n, "reset_prefix_cache": bool}]}
The result has, per pass, each request's output token ids and num_cached_tokens.
"""

from __future__ import annotations

import json
import sys
import time


def main() -> None:
    spec = json.load(sys.stdin)
    from vllm import LLM, SamplingParams

    llm = LLM(model=spec["model"], **spec.get("llm", {}))
    passes = []
    for p in spec["passes"]:
        if p.get("reset_prefix_cache"):
            assert llm.reset_prefix_cache(), "prefix cache reset refused"
        params = SamplingParams(temperature=0.0,
                                max_tokens=p.get("max_tokens", 16),
                                ignore_eos=True)
        start = time.perf_counter()
        outs = llm.generate(p["prompts"], params, use_tqdm=False)
        passes.append({
            "seconds": time.perf_counter() - start,
            "tokens": [list(o.outputs[0].token_ids) for o in outs],
            "prompt_tokens": [len(o.prompt_token_ids) for o in outs],
            "cached": [o.num_cached_tokens or 0 for o in outs],
        })
    print("LLM_RUNNER_RESULT " + json.dumps({"passes": passes}), flush=True)


if __name__ == "__main__":
    main()
