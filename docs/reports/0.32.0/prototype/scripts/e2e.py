"""End-to-end check of CPU-platform offloading (run with nice -n 19).

usage: e2e.py MODE [PHASE]
  MODE  off | cpu | tier | cli   (cli: --kv-offloading-size)
  PHASE both (default): pass 1, drop the KV cache's prefix cache, pass 2
        write: pass 1 only (tier: leaves files under FS_ROOT)
        read: pass 2 only, in a fresh engine (tier: served by the fs files)
Writes the outputs as JSON to OUT (env, default /tmp/e2e-MODE-PHASE.json).
"""
import glob
import json
import os
import sys
import time

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
from vllm import LLM, SamplingParams  # noqa: E402
from vllm.inputs import TokensPrompt  # noqa: E402

FS_ROOT = os.environ.get("FS_ROOT", "/tmp/fs-tier")


def prompts():
    import random

    rng = random.Random(1234)
    # 4 prompts of 100..250 tokens: 3..7 full 32-token blocks each
    return [
        TokensPrompt(prompt_token_ids=[rng.randrange(2, 1000) for _ in range(n)])
        for n in (100, 150, 200, 250)
    ]


def make_llm(mode):
    kw = {}
    extra = {"cpu_bytes_to_use": 64 << 20}
    if os.environ.get("CANON") == "1":
        extra["canonical_layout"] = True
    if mode == "cpu":
        kw["kv_transfer_config"] = {
            "kv_connector": "OffloadingConnector",
            "kv_role": "kv_both",
            "kv_connector_extra_config": extra,
        }
    elif mode == "tier":
        extra.update(
            spec_name="TieringOffloadingSpec",
            secondary_tiers=[
                {"type": "fs", "root_dir": FS_ROOT,
                 "n_read_threads": 2, "n_write_threads": 2}
            ],
        )
        kw["kv_transfer_config"] = {
            "kv_connector": "OffloadingConnector",
            "kv_role": "kv_both",
            "kv_connector_extra_config": extra,
        }
    elif mode == "cli":
        kw["kv_offloading_size"] = 0.0625
    model = glob.glob(os.path.expanduser("~/.cache/vllm-kv-offload/models/tiny-llama-a*"))[0]
    return LLM(model, block_size=32, max_model_len=512, enforce_eager=True,
               disable_log_stats=False,
               tensor_parallel_size=int(os.environ.get("TP", "1")), **kw)


def run(llm, label):
    sp = SamplingParams(max_tokens=16, temperature=0, ignore_eos=True)
    outs = llm.generate(prompts(), sp, use_tqdm=False)
    res = [{"tokens": list(o.outputs[0].token_ids),
            "num_cached_tokens": o.num_cached_tokens} for o in outs]
    print(label, [r["num_cached_tokens"] for r in res], flush=True)
    return res


def settle(llm):
    # Stores are submitted at the start of the next step: run a few short
    # unrelated requests so they are submitted and reported as done.
    for _ in range(3):
        llm.generate([TokensPrompt(prompt_token_ids=[5, 6, 7])],
                     SamplingParams(max_tokens=2), use_tqdm=False)
        time.sleep(0.5)


def offload_metrics(llm):
    out = {}
    for m in llm.get_metrics():
        if "offload" in m.name or "prefix_cache" in m.name or "external" in m.name:
            v = getattr(m, "value", None)
            if v is None:
                v = getattr(m, "sum", None)
            key = m.name + (str(sorted(m.labels.items())) if getattr(m, "labels", None) and any(k != "engine" and k != "model_name" for k in m.labels) else "")
            out[key] = v
    return out


def main():
    mode = sys.argv[1]
    phase = sys.argv[2] if len(sys.argv) > 2 else "both"
    llm = make_llm(mode)
    result = {"mode": mode, "phase": phase}
    if phase in ("both", "write"):
        result["pass1"] = run(llm, "pass1 cached:")
        settle(llm)
        if phase == "write" and mode == "tier":
            time.sleep(3)  # let the fs tier's writes finish
            settle(llm)
    if phase == "both":
        assert llm.reset_prefix_cache(), "prefix cache reset refused"
    if phase in ("both", "read"):
        result["pass2"] = run(llm, "pass2 cached:")
        if mode == "tier" and phase == "read" and max(
                r["num_cached_tokens"] for r in result["pass2"]) == 0:
            # fs lookups are asynchronous: the first pass may miss
            settle(llm)
            assert llm.reset_prefix_cache()
            result["pass3"] = run(llm, "pass3 cached:")
    result["metrics"] = offload_metrics(llm)
    for k, v in sorted(result["metrics"].items()):
        print("metric", k, v)
    out = os.environ.get("OUT", f"/tmp/e2e-{mode}-{phase}.json")
    with open(out, "w") as f:
        json.dump(result, f)
    print("wrote", out)


if __name__ == "__main__":
    main()
