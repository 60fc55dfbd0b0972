"""The probe on vLLM 0.32's own OffloadingConnector (the 0.32 line).

It has no counters the probe can read: its connector stats (bytes and times
of transfers, lookup delays) go to the stat loggers, and the scheduler
takes them every step. So the probe counts for itself, on this instance,
from the first time it looks at the connector:
- loaded tokens and requests: the external tokens of each admitted request
  (common.on_admission), as the series' connector counts them;
- stored blocks: the keys (offloaded blocks) the scheduler side passes to
  its manager's complete_store, which it calls once a store job has
  completed on every worker.
Stores in flight are the scheduler side's transfer jobs: each job counts
down its workers' completions, then leaves the job table (`_jobs`); the
worker reports a store's completion only when the engine steps.
has_pending_push_work() says whether any job (store or load) is in flight
or the manager has work pending.

The CPU tier is the CPU tensors of the CPUOffloadingWorker's two transfer
handlers (SingleDirectionOffloadingHandler, or a subclass of it for a KV
cache in host memory): the load handler's sources. The worker is found
from the worker-side connector, not by gc.get_objects() as on the series:
0.32 freezes a started engine's objects (gc.freeze()) out of its view.
"""

from __future__ import annotations

from dataclasses import dataclass

from .common import OffloadStats, ProbeError, on_admission

NAME = "vLLM's own OffloadingConnector (vLLM 0.32)"

# The attribute of the connector instance that holds the probe's counters.
_COUNTERS = "_pstack_offload_counters"


@dataclass
class _Counters:
    loaded_tokens: int = 0
    load_requests: int = 0
    stored_blocks: int = 0


def matches(connector) -> bool:
    """Whether `connector` is vLLM 0.32's OffloadingConnector: a scheduler
    side with an offloading manager, and has_pending_push_work()."""
    scheduler_side = getattr(connector, "connector_scheduler", None)
    return (callable(getattr(connector, "has_pending_push_work", None))
            and hasattr(scheduler_side, "manager"))


def _counters(connector) -> _Counters:
    """The probe's counters of `connector`, counting from the first call."""
    counters = connector.__dict__.get(_COUNTERS)
    if counters is not None:
        return counters
    counters = _Counters()

    def admitted(request, num_external_tokens: int) -> None:
        if num_external_tokens:
            counters.loaded_tokens += num_external_tokens
            counters.load_requests += 1

    manager = connector.connector_scheduler.manager
    complete_store = manager.complete_store

    def counting_complete_store(keys, req_context, success: bool = True):
        if success:
            counters.stored_blocks += len(keys)
        return complete_store(keys, req_context, success)

    on_admission(connector, admitted)
    manager.complete_store = counting_complete_store
    setattr(connector, _COUNTERS, counters)
    return counters


def watch(connector) -> None:
    """Start the probe's counters of `connector` (once)."""
    _counters(connector)


def output_request_id(llm, request) -> str:
    """The id the RequestOutput of a scheduler's Request carries.

    0.32 gives every request an id of its own, the caller's plus 8 random
    characters (InputProcessor.assign_request_id); the output processor
    keeps the caller's, per request it has in flight.
    """
    output_processor = getattr(llm.llm_engine, "output_processor", None)
    states = getattr(output_processor, "request_states", {})
    state = states.get(request.request_id)
    return getattr(state, "external_req_id", None) or request.request_id


def _store_requests(connector) -> set[str]:
    """The requests with store jobs in flight."""
    jobs = getattr(connector.connector_scheduler, "_jobs", None)
    if not isinstance(jobs, dict):
        raise ProbeError(
            "the OffloadingConnector's scheduler side has no job table "
            "(_jobs) to count the stores in flight: this vLLM is not the "
            "0.32 the probe knows (harness/offload_probe/v0_32.py)")
    return {job.req_id for job in jobs.values() if job.is_store}


def stats(connector) -> OffloadStats:
    """The probe's counters (since it first looked at the connector) and the
    requests with stores in flight."""
    counters = _counters(connector)
    return OffloadStats(loaded_tokens=counters.loaded_tokens,
                        load_requests=counters.load_requests,
                        stored_blocks=counters.stored_blocks,
                        pending_store_requests=len(_store_requests(connector)))


def stores_in_flight(connector) -> bool:
    """Whether the connector needs engine steps to finish its transfers
    (between passes no load is in flight: these are stores)."""
    return bool(connector.has_pending_push_work())


def zero_cpu_tier() -> None:
    """Wipe the KV data in the CPU tier of the engine in this process.

    The worker-side connector is the process's KV transfer group (0.32
    freezes the objects of a started engine out of gc.get_objects()); its
    offloading worker's transfer handler that loads reads the CPU tier.
    """
    from vllm.distributed.kv_transfer import (get_kv_transfer_group,
                                              has_kv_transfer_group)
    from vllm.v1.kv_offload.cpu.gpu_worker import (
        SingleDirectionOffloadingHandler)
    worker = None
    if has_kv_transfer_group():
        connector_worker = getattr(get_kv_transfer_group(), "connector_worker",
                                   None)
        worker = getattr(connector_worker, "worker", None)
    loads = [
        handler for handler in vars(worker).values()
        if isinstance(handler, SingleDirectionOffloadingHandler)
        and not handler.gpu_to_cpu
    ] if worker is not None else []
    if not loads:
        raise ProbeError(
            "fault injection: no CPU tier (an offloading worker with a "
            "SingleDirectionOffloadingHandler that loads) in this process")
    for handler in loads:
        for tensor in handler.src_tensors:
            tensor.zero_()
