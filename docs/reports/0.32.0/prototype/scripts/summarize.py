"""Summarize results/final-*.json against final-off.json pass 1."""
import json
import os

R = "/root/wip-0.32/results"
ref = [x["tokens"] for x in json.load(open(f"{R}/final-off.json"))["pass1"]]
for name in ("off", "cpu", "cli", "tier-write", "tier-read", "tp2-cpu"):
    path = f"{R}/final-{name}.json"
    if not os.path.exists(path):
        continue
    r = json.load(open(path))
    m = r["metrics"]
    for p in ("pass1", "pass2", "pass3"):
        if p in r:
            same = [x["tokens"] == t for x, t in zip(r[p], ref)]
            cached = [x["num_cached_tokens"] for x in r[p]]
            print(f"{name:10} {p}: identical to off={all(same)} cached={cached}")
    keys = ["vllm:kv_offload_store_bytes", "vllm:kv_offload_load_bytes",
            "vllm:external_prefix_cache_hits"]
    tier = {k.split("('tier', ")[1].rstrip("')]") + ":" + k.split("[")[0].split("tiering_")[1]: v
            for k, v in m.items() if "tiering_" in k and ("bytes" in k or "hits" in k)}
    print(f"{'':10} " + ", ".join(f"{k.split(':')[1]}={m.get(k)}" for k in keys), tier or "")
