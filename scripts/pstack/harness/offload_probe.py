"""Look inside an in-process vLLM engine: the scheduler's KV connector and
its offloading statistics, committing pending stores, resetting the GPU
prefix cache.

Used by the lm-eval gate, `make demo` and the TTFT benchmark. It needs the
engine core in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0): vLLM 0.9.2's
`LLM` nests it as llm.llm_engine (V1 LLMEngine) .engine_core (InprocClient)
.engine_core (EngineCore) .scheduler.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

STAT_FIELDS = ("loaded_tokens", "load_requests", "stored_blocks",
               "pending_store_requests")


class ProbeError(Exception):
    """The engine is not set up the way the probe needs; the message says
    how to fix it."""


@dataclass(frozen=True)
class OffloadStats:
    """A snapshot of the connector's `offloading_stats` (ints, cumulative
    but the last)."""

    loaded_tokens: int = 0
    load_requests: int = 0
    stored_blocks: int = 0
    pending_store_requests: int = 0

    def minus(self, before: OffloadStats) -> OffloadStats:
        """Counts since `before`; pending_store_requests stays the current
        value."""
        return OffloadStats(
            loaded_tokens=self.loaded_tokens - before.loaded_tokens,
            load_requests=self.load_requests - before.load_requests,
            stored_blocks=self.stored_blocks - before.stored_blocks,
            pending_store_requests=self.pending_store_requests)

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


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


def offload_stats(llm) -> OffloadStats:
    """Snapshot of the OffloadingConnector's counters."""
    connector = scheduler_connector(llm)
    stats = getattr(connector, "offloading_stats", None)
    if stats is None:
        raise ProbeError(
            f"the KV connector {type(connector).__name__} has no "
            "offloading_stats; it must be the OffloadingConnector of the "
            "series")
    missing = [f for f in STAT_FIELDS if not hasattr(stats, f)]
    if missing:
        raise ProbeError(f"offloading_stats lacks {', '.join(missing)}")
    return OffloadStats(**{f: int(getattr(stats, f)) for f in STAT_FIELDS})


def record_cpu_hits(llm) -> dict[str, int]:
    """Start recording, per request id, the tokens the scheduler takes from
    the connector.

    Returns the dict that fills as requests are admitted (request ids are
    RequestOutput.request_id). It wraps the connector's
    update_state_after_alloc on this instance, which the scheduler calls once
    per admitted request with the number of external (CPU-tier) tokens.
    """
    connector = scheduler_connector(llm)
    hits: dict[str, int] = {}
    inner = connector.update_state_after_alloc

    def update_state_after_alloc(request, blocks, num_external_tokens):
        if num_external_tokens:
            hits[request.request_id] = num_external_tokens
        return inner(request, blocks, num_external_tokens)

    connector.update_state_after_alloc = update_state_after_alloc
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
    deadline = time.monotonic() + timeout
    steps = 0
    while offload_stats(llm).pending_store_requests > 0:
        if time.monotonic() > deadline:
            raise ProbeError(
                f"stores still pending after {timeout:.0f} s and {steps} "
                f"forced engine steps: {offload_stats(llm).as_dict()}")
        force_step(llm)
        steps += 1
        time.sleep(poll)
    return steps


def reset_gpu_prefix_cache(llm, attempts: int = 20) -> int:
    """Empty the GPU prefix cache (the CPU tier keeps its blocks).

    V1's LLM.reset_prefix_cache() drops the scheduler's answer, and the reset
    is refused while any block is in use (e.g. held by a finishing store), so
    this asks the scheduler directly and steps the engine between attempts.
    Returns the number of forced steps.
    """
    scheduler = engine_core(llm).scheduler
    for steps in range(attempts):
        if scheduler.reset_prefix_cache():
            return steps
        force_step(llm)
    raise ProbeError(
        f"the GPU prefix cache reset was refused {attempts} times "
        "(blocks still in use)")
