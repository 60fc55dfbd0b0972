"""`make lm-eval`: the correctness gate of KV offloading, through lm-eval's vLLM backend.

Every configuration runs in its own process (lm_eval_worker.py) and evaluates
the same tasks twice on one engine. Between the passes the worker waits until
all KV stores have committed and resets the GPU prefix cache, so with the
OffloadingConnector pass 2 loads the prompts' KV from the CPU tier.

Profiles:
  cpu (default, CI): the generated tiny models on the local task
      ci/lm-eval/pstack_offload_gen.yaml, fully offline. Random weights make
      accuracy meaningless, so every sample's response must be IDENTICAL
      across the baseline (no connector) and the offloading configurations,
      pass 1 and pass 2.
  gpu: a real instruct model (MODEL=<hub id or path>) on lm-eval's gsm8k,
      downloading both; GPU kernels are not batch-invariant, so each run's
      accuracy must be within --tolerance of the baseline's pass 1.
In both, pass 2 of each offloading configuration must show CPU-tier hits.
Exit status: 0 gate passed, 1 gate failed (a mismatch, no CPU hits, a crashed
configuration), 2 it could not start (setup, arguments).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .common import REPO, UserError, main_wrapper, progress

TASK_DIR = REPO / "ci" / "lm-eval"
OUT_DIR = REPO / "out" / "lm-eval"
MAX_MISMATCH_LINES = 20
# Largest difference of a loglikelihood between a run and the reference in
# the exact (cpu) profile: the same requests, in bfloat16, in batches that
# may differ between the runs.
LOGPROB_TOLERANCE = 1e-3
CONNECTOR = {"kv_connector": "OffloadingConnector", "kv_role": "kv_both"}


@dataclass(frozen=True)
class GateConfig:
    model: str
    name: str
    # kv_connector_extra_config of the OffloadingConnector; None: no connector.
    offload: dict | None = None

    @property
    def label(self) -> str:
        # A local model directory is named by its last component.
        model = Path(self.model).name if os.path.isabs(self.model) else self.model
        return f"{model}/{self.name}"


@dataclass
class Profile:
    name: str
    tasks: list[str]
    # lm-eval's own tasks (gsm8k) besides the local ones in ci/lm-eval.
    builtin_tasks: bool
    configs: list[GateConfig]
    base_args: dict
    env: dict[str, str]
    exact: bool
    limit: int | None = None
    tolerance: float = 0.0


# Tiny models: the prompts are 363..500 tokens, a shared prefix of 336; the
# working set is 299 offloaded blocks of 16 tokens, 161 of 32, 68 of 64.
CPU_CONFIGS = [
    GateConfig("tiny-llama", "baseline"),
    GateConfig("tiny-llama", "offload-b16-lru", {"num_cpu_blocks": 512, "block_size": 16}),
    # A pool smaller than the working set: pass 2 mixes hits and misses.
    GateConfig("tiny-llama", "offload-b64-arc-evicting",
               {"num_cpu_blocks": 40, "block_size": 64, "eviction_policy": "arc"}),
    GateConfig("tiny-llama-gqa", "baseline"),
    GateConfig("tiny-llama-gqa", "offload-b32-bytes",
               {"cpu_bytes_to_use": 16 << 20, "block_size": 32}),
]
# 250 gsm8k 5-shot prompts are about 200k tokens, 4-7 GiB of KV for a 1-8B
# model: 8 GiB holds them, 2 GiB evicts.
GPU_CONFIG_NAMES = [("baseline", None),
                    ("offload-b16", {"cpu_bytes_to_use": 8 << 30, "block_size": 16}),
                    ("offload-b64-evicting", {"cpu_bytes_to_use": 2 << 30, "block_size": 64})]


def cpu_profile(models: list[str] | None) -> Profile:
    from .run_tests import OFFLINE_ENV
    known = sorted({c.model for c in CPU_CONFIGS})
    for m in models or []:
        if m not in known:
            raise UserError(f"the cpu profile has no model {m!r}",
                            f"choose from {', '.join(known)}, or use PROFILE=gpu for a hub model")
    return Profile(
        name="cpu", tasks=["pstack_offload_gen", "pstack_offload_ll", "pstack_offload_mc"],
        builtin_tasks=False,
        configs=[c for c in CPU_CONFIGS if not models or c.model in models],
        base_args={"dtype": "bfloat16", "max_model_len": 1024, "seed": 0,
                   "enforce_eager": True, "enable_prefix_caching": True, "block_size": 16,
                   "batch_size": "auto"},
        # One OpenMP thread: on small shared machines the default spins in
        # barriers and makes every engine step several times slower.
        env={**OFFLINE_ENV, "VLLM_CPU_KVCACHE_SPACE": "1",
             "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}, exact=True)


def gpu_profile(models: list[str] | None, limit: int, tolerance: float) -> Profile:
    if not models:
        raise UserError("the gpu profile needs a model",
                        "make lm-eval PROFILE=gpu MODEL=Qwen/Qwen2.5-1.5B-Instruct "
                        "(any 1-8B instruct model vLLM 0.9.2 supports)")
    return Profile(
        name="gpu", tasks=["gsm8k"], builtin_tasks=True,
        configs=[GateConfig(m, name, extra) for m in models for name, extra in GPU_CONFIG_NAMES],
        base_args={"dtype": "auto", "max_model_len": 4096, "seed": 0,
                   "gpu_memory_utilization": 0.8, "enable_prefix_caching": True,
                   "block_size": 16, "batch_size": "auto"},
        env={"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}, exact=False,
        limit=limit, tolerance=tolerance)


def model_path(profile: Profile, model: str) -> str:
    if profile.name == "cpu":
        from .tiny_models import generate
        return str(generate(model))
    return model


def worker_spec(profile: Profile, config: GateConfig, output: Path) -> dict:
    args = {"pretrained": model_path(profile, config.model), **profile.base_args}
    if config.offload is not None:
        args["kv_transfer_config"] = {**CONNECTOR, "kv_connector_extra_config": config.offload}
    return {"name": config.label, "model_args": args, "tasks": profile.tasks,
            "include_path": str(TASK_DIR), "include_defaults": profile.builtin_tasks,
            "limit": profile.limit, "passes": 2, "output": str(output)}


# ---------------------------------------------------------------- running

def _files(out: Path, config: GateConfig) -> tuple[Path, Path]:
    stem = config.label.replace("/", "__")
    return out / f"{stem}.json", out / f"{stem}.log"


def _worker(profile: Profile, specs: list[dict], fork: bool, timeout: float,
            log_file: Path) -> None:
    """Run the worker on `specs`, echoing its progress lines; the rest goes to `log_file`.

    The configurations write their own logs; this one has what the worker
    printed outside of them (imports, a crash before the first fork).
    """
    env = {**os.environ, **profile.env, "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
           "PYTHONPATH": str(REPO / "scripts")}
    with open(log_file, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "pstack.lm_eval_worker"],
                                # The local task's data_files are relative to its directory.
                                cwd=TASK_DIR, env=env, text=True, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        proc.stdin.write(json.dumps({"specs": specs, "fork": fork, "timeout": timeout}))
        proc.stdin.close()
        for line in proc.stdout:
            if line.startswith("gate: "):
                progress(line[len("gate: "):].rstrip())
            else:
                log.write(line)
        log.write(f"worker exit status {proc.wait()}\n")


def _collect(config: GateConfig, result_file: Path, log_file: Path, worker_log: Path) -> dict:
    """The worker's result for one configuration, or {"error": ...}."""
    result = json.loads(result_file.read_text()) if result_file.exists() else {}
    if "passes" in result:
        result.update(label=config.label, model=config.model, offload_config=config.offload)
        return result
    error = result.get("error")
    if error is None:
        log = log_file if log_file.exists() else worker_log
        tail = log.read_text().splitlines()[-12:] if log.exists() else []
        error = f"no result; last lines of {log}:\n    " + "\n    ".join(tail)
    return {"label": config.label, "model": config.model, "error": error}


def run_configs(profile: Profile, out: Path, timeout: float = 900,
                fault: str | None = None) -> list[dict]:
    """Evaluate every configuration on a fresh engine.

    cpu: one worker imports lm-eval and vLLM once and forks a child per
    configuration (imports cost more than the tiny models' evaluation).
    gpu: one worker process per configuration.
    """
    specs = []
    for config in profile.configs:
        result_file, log_file = _files(out, config)
        result_file.unlink(missing_ok=True)
        specs.append({**worker_spec(profile, config, result_file), "log": str(log_file),
                      "fault": fault})
    worker_log = out / "worker.log"
    if profile.name == "cpu":
        _worker(profile, specs, fork=True, timeout=timeout, log_file=worker_log)
    else:
        for spec in specs:
            _worker(profile, [spec], fork=False, timeout=timeout, log_file=worker_log)
    return [_collect(c, *_files(out, c), worker_log) for c in profile.configs]


# ---------------------------------------------------------------- verdict

@dataclass
class Verdict:
    rows: list[dict] = field(default_factory=list)
    mismatches: list[dict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    exact: bool = True

    @property
    def passed(self) -> bool:
        return not self.problems and (not self.exact or not self.mismatches)


def _key(sample: dict) -> tuple:
    return (sample["task"], sample["doc_id"], sample["filter"])


def _metric_items(metrics: dict) -> dict[str, float]:
    return {f"{task}:{name}": float(v) for task, m in metrics.items() for name, v in m.items()
            if isinstance(v, (int, float))}


def _close(a, b, tolerance: float) -> bool:
    """Equal, except that numbers (loglikelihoods) may differ by tolerance."""
    if isinstance(a, float) or isinstance(b, float):
        return (isinstance(a, (int, float)) and isinstance(b, (int, float))
                and not isinstance(a, bool) and not isinstance(b, bool)
                and abs(a - b) <= tolerance)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y, tolerance) for x, y in zip(a, b))
    return a == b


def _choice(sample: dict) -> int | None:
    """The answer a multiple-choice sample picks: its most likely choice."""
    scores = sample["filtered_resps"]
    if len(scores) < 2 or not all(isinstance(x, list) and x for x in scores):
        return None
    return max(range(len(scores)), key=lambda i: scores[i][0])


def same_answer(ref: dict, sample: dict) -> bool:
    """The same generated text; or the same choice, the same is_greedy flags
    and loglikelihoods within LOGPROB_TOLERANCE."""
    return (_close(ref["resps"], sample["resps"], LOGPROB_TOLERANCE)
            and _close(ref["filtered_resps"], sample["filtered_resps"], LOGPROB_TOLERANCE)
            and _choice(ref) == _choice(sample))


def _is_prompt_logprobs(sample: dict) -> bool:
    # loglikelihood and multiple choice: prompt_logprobs requests.
    return sample.get("kind", "generate") == "loglikelihood"


def judge(runs: list[dict], exact: bool = True, tolerance: float = 0.0) -> Verdict:
    """Compare every pass of every run with the reference of its model.

    The reference is pass 1 of the model's baseline run (the first run of the
    model if it has no baseline). `exact`: responses must be identical;
    otherwise metrics must be within `tolerance` of the reference and
    differing responses are only listed.
    """
    v = Verdict(exact=exact)
    refs: dict[str, dict] = {}
    for run in sorted((r for r in runs if "error" not in r), key=lambda r: bool(r["connector"])):
        refs.setdefault(run["model"], run)
    for run in runs:
        if "error" in run:
            v.problems.append(f"{run['label']}: {run['error']}")
            continue
        ref_run = refs[run["model"]]
        ref = {_key(s): s for s in ref_run["passes"][0]["samples"]}
        ref_metrics = _metric_items(ref_run["passes"][0]["metrics"])
        if not ref:
            v.problems.append(f"{run['label']}: no samples were evaluated")
        for p in run["passes"]:
            samples = {_key(s): s for s in p["samples"]}
            is_ref = run is ref_run and p["pass"] == 1
            identical = 0
            for key, s in samples.items():
                r = ref.get(key)
                if r is None:
                    v.problems.append(f"{run['label']} pass {p['pass']}: {key[0]} doc {key[1]} "
                                      f"is not in the reference")
                elif r["prompt_hash"] != s["prompt_hash"]:
                    v.problems.append(f"{run['label']} pass {p['pass']}: {key[0]} doc {key[1]}: "
                                      "the prompt differs from the reference (task drift)")
                elif not same_answer(r, s):
                    v.mismatches.append({"run": run["label"], "pass": p["pass"], "task": key[0],
                                         "doc_id": key[1], "filter": key[2],
                                         "expected": r["resps"], "got": s["resps"]})
                else:
                    identical += 1
            missing = len(set(ref) - set(samples))
            if missing:
                v.problems.append(f"{run['label']} pass {p['pass']}: {missing} reference "
                                  "samples missing")
            metrics = _metric_items(p["metrics"])
            if not exact:
                for name, ref_value in ref_metrics.items():
                    value = metrics.get(name)
                    if value is None or abs(value - ref_value) > tolerance:
                        v.problems.append(f"{run['label']} pass {p['pass']}: {name} = {value} vs "
                                          f"baseline {ref_value:.4f} (tolerance {tolerance})")
            off = p.get("offload") or {}
            generated = [s for s in samples.values() if not _is_prompt_logprobs(s)]
            scored = [s for s in samples.values() if _is_prompt_logprobs(s)]
            cpu_hit_samples = sum(1 for s in generated if s.get("cpu_hit_tokens"))
            scored_hit_tokens = sum(s.get("cpu_hit_tokens") or 0 for s in scored)
            if run.get("connector") and p["pass"] > 1 and generated and (
                    not off.get("loaded_tokens") or not cpu_hit_samples):
                v.problems.append(
                    f"{run['label']} pass {p['pass']}: no evidence of loads from the CPU tier "
                    f"(loaded_tokens {off.get('loaded_tokens', 0)}, {cpu_hit_samples} samples "
                    "with CPU hits)")
            if scored_hit_tokens:
                v.problems.append(
                    f"{run['label']} pass {p['pass']}: {scored_hit_tokens} tokens of "
                    "prompt-logprob requests were loaded from the CPU tier (their prompt "
                    "logprobs cannot be computed)")
            v.rows.append({
                "run": run["label"], "pass": p["pass"], "samples": len(samples),
                "identical": None if is_ref else identical,
                "connector": bool(run.get("connector")), "cpu_hit_samples": cpu_hit_samples,
                "cpu_hit_tokens": sum(s.get("cpu_hit_tokens") or 0 for s in generated),
                "scored_samples": len(scored), "scored_cpu_hit_tokens": scored_hit_tokens,
                "loaded_tokens": off.get("loaded_tokens"),
                "stored_blocks": off.get("stored_blocks"), "seconds": p.get("seconds"),
                "metrics": metrics})
    return v


def _short(value, width: int = 48) -> str:
    """A response for one line: the generated string's repr (control characters escaped)."""
    while isinstance(value, list) and len(value) == 1:
        value = value[0]
    text = repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."


def format_report(v: Verdict) -> str:
    def cell(x):
        return "-" if x is None else str(x)

    w = max([len(r["run"]) for r in v.rows] + [3])
    lines = [f"{'run':<{w}} {'pass':>4} {'samples':>7} {'identical':>9} {'cpu-hit':>7} "
             f"{'hit tok':>8} {'loaded':>8} {'stored':>7} {'s':>6}  metrics"]
    for r in v.rows:
        metrics = " ".join(f"{k.split(':', 1)[1]}={val:.3f}" for k, val in r["metrics"].items())
        conn = r["connector"]
        lines.append(
            f"{r['run']:<{w}} {r['pass']:>4} {r['samples']:>7} "
            f"{'ref' if r['identical'] is None else r['identical']:>9} "
            f"{cell(r['cpu_hit_samples'] if conn else None):>7} "
            f"{cell(r['cpu_hit_tokens'] if conn else None):>8} {cell(r['loaded_tokens']):>8} "
            f"{cell(r['stored_blocks']):>7} {cell(r['seconds']):>6}  {metrics}")
    lines.append("(cpu-hit: generated samples whose request loaded KV from the CPU tier; hit "
                 "tok: their tokens; loaded/stored: the connector's counters during the pass)")
    scored = max((r.get("scored_samples", 0) for r in v.rows), default=0)
    if scored:
        hit = sum(r.get("scored_cpu_hit_tokens", 0) for r in v.rows if r["connector"])
        lines.append(
            f"loglikelihood and multiple-choice samples (prompt_logprobs requests): {scored} "
            f"per pass, compared by choice, is_greedy and loglikelihood (within "
            f"{LOGPROB_TOLERANCE:g}); {hit} tokens of theirs came from the CPU tier"
            + (": none, by design: vLLM computes the whole prompt of a request with "
               "prompt_logprobs, so these samples check that the connector stays out of "
               "their way, not loads" if not hit else ""))
    if v.mismatches:
        lines.append(f"{len(v.mismatches)} responses differ from the reference"
                     + ("" if v.exact else " (allowed in this profile)") + ":")
        for m in v.mismatches[:MAX_MISMATCH_LINES]:
            lines.append(f"  {m['run']} pass {m['pass']}: {m['task']} doc_id {m['doc_id']} "
                         f"[{m['filter']}]: expected {_short(m['expected'])} "
                         f"got {_short(m['got'])}")
        if len(v.mismatches) > MAX_MISMATCH_LINES:
            lines.append(f"  ... {len(v.mismatches) - MAX_MISMATCH_LINES} more in the report file")
    for p in v.problems:
        lines.append(f"problem: {p}")
    runs = len({r['run'] for r in v.rows})
    offload_rows = [r for r in v.rows if r["connector"] and r["pass"] > 1]
    samples = max((r["samples"] for r in v.rows), default=0)
    if v.passed:
        lines.append(
            f"PASS: {runs} configurations x 2 passes, {samples} samples each: "
            + ("identical responses" if v.exact else "accuracy within tolerance")
            + ("; pass 2 loaded from the CPU tier in "
               + ", ".join(f"{r['run']} ({r['cpu_hit_samples']}/{r['samples']} samples, "
                           f"{r['loaded_tokens']} tokens)" for r in offload_rows)
               if offload_rows else "; no offloading configuration ran"))
    else:
        lines.append(f"FAIL: {len(v.mismatches) if v.exact else 0} mismatches, "
                     f"{len(v.problems)} problems")
    return "\n".join(lines)


# ---------------------------------------------------------------- main

def check_lm_eval() -> None:
    proc = subprocess.run([sys.executable, "-c", "import lm_eval, vllm"], text=True,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        raise UserError(f"{sys.executable} cannot import lm_eval and vllm: {last}",
                        "run `make setup` (cpu profile), or install the patched wheel and "
                        "lm-eval==0.4.13 into the Python given as PYTHON= (gpu profile)")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="lm-eval", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--model", action="append",
                        help="cpu: restrict to these tiny models; gpu: required, hub id or path")
    parser.add_argument("--config", action="append", metavar="NAME",
                        help="run only configurations with this name (e.g. baseline)")
    parser.add_argument("--task", action="append",
                        help="evaluate these tasks instead (lm-eval names; cpu: local tasks only)")
    parser.add_argument("--limit", type=int, default=250, help="gpu: gsm8k questions")
    parser.add_argument("--tolerance", type=float, default=0.05,
                        help="gpu: largest allowed accuracy difference to the baseline")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"results directory (default {OUT_DIR.relative_to(REPO)}/<profile>)")
    parser.add_argument("--list", action="store_true", help="print the configurations and exit")
    parser.add_argument("--inject-fault", choices=["zero-cpu-tier"],
                        help="self-test: wipe the CPU tier's KV data before pass 2; "
                             "the gate must then fail")
    args = parser.parse_args(argv)

    profile = (cpu_profile(args.model) if args.profile == "cpu"
               else gpu_profile(args.model, args.limit, args.tolerance))
    if args.config:
        unknown = set(args.config) - {c.name for c in profile.configs}
        if unknown:
            raise UserError(f"unknown configuration {', '.join(sorted(unknown))}",
                            "see --list")
        profile.configs = [c for c in profile.configs if c.name in args.config]
    if args.task:
        profile.tasks = args.task
    if args.list:
        for c in profile.configs:
            print(f"{c.label:<40} {json.dumps(c.offload) if c.offload else 'no connector'}")
        return 0
    out = args.out or OUT_DIR / profile.name
    out.mkdir(parents=True, exist_ok=True)
    check_lm_eval()

    start = time.monotonic()
    progress(f"lm-eval gate, {profile.name} profile: {len(profile.configs)} configurations x "
             f"2 passes of {', '.join(profile.tasks)}; logs and samples in {out}")
    runs = run_configs(profile, out, fault=args.inject_fault)
    verdict = judge(runs, exact=profile.exact, tolerance=profile.tolerance)
    (out / "report.json").write_text(json.dumps(
        {"rows": verdict.rows, "mismatches": verdict.mismatches, "problems": verdict.problems,
         "passed": verdict.passed}, indent=1) + "\n")
    print(format_report(verdict))
    print(f"gate wall time {time.monotonic() - start:.0f} s")
    return 0 if verdict.passed else 1


if __name__ == "__main__":
    main_wrapper(main)
