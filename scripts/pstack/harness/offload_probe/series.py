"""The probe on the series' OffloadingConnector (the lines on vLLM 0.9.2
and 0.10.2): the connector keeps its own counters, `offloading_stats`, and
the CPU tier is the rows of its CpuGpuOffloadingHandlers."""

from __future__ import annotations

from .common import STAT_FIELDS, OffloadStats, ProbeError

NAME = "the series' OffloadingConnector (vLLM 0.9.2, 0.10.2)"


def matches(connector) -> bool:
    """Whether `connector` is the series' OffloadingConnector: it has
    offloading_stats (a property: looked up on the class, not called)."""
    return hasattr(type(connector), "offloading_stats")


def watch(connector) -> None:
    """Nothing to prepare: the connector counts from engine start."""


def output_request_id(llm, request) -> str:
    """The id the RequestOutput of a scheduler's Request carries: the
    same."""
    return request.request_id


def stats(connector) -> OffloadStats:
    """The connector's offloading_stats (cumulative since engine start)."""
    stats = connector.offloading_stats
    missing = [f for f in STAT_FIELDS if not hasattr(stats, f)]
    if missing:
        raise ProbeError(f"offloading_stats lacks {', '.join(missing)}")
    return OffloadStats(**{f: int(getattr(stats, f)) for f in STAT_FIELDS})


def stores_in_flight(connector) -> bool:
    """Whether a store has not completed on every worker, or a finished
    request still holds its GPU blocks for one."""
    return stats(connector).pending_store_requests > 0


def zero_cpu_tier() -> None:
    """Wipe the KV data in the CPU tier of the engine in this process."""
    import gc

    from vllm.v1.kv_offload.worker.cpu_gpu import CpuGpuOffloadingHandlers
    tiers = [
        o for o in gc.get_objects() if isinstance(o, CpuGpuOffloadingHandlers)
    ]
    if not tiers:
        raise ProbeError(
            "fault injection: no CPU tier (CpuGpuOffloadingHandlers) in this "
            "process")
    for tier in tiers:
        for rows in tier.cpu_rows:
            rows.zero_()
