"""What every generation of the probe shares: its error, the counters'
snapshot, and the hook on the requests the scheduler admits."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

STAT_FIELDS = ("loaded_tokens", "load_requests", "stored_blocks",
               "pending_store_requests")

# The attribute of a connector instance that holds the probe's callbacks on
# admitted requests (set by on_admission).
_ADMISSION_HOOKS = "_pstack_admission_hooks"


class ProbeError(Exception):
    """The engine is not set up the way the probe needs; the message says
    how to fix it."""


@dataclass(frozen=True)
class OffloadStats:
    """A snapshot of the connector's counters (ints, cumulative but the
    last)."""

    # Tokens whose KV the connector loads (prefix hits), counted when their
    # request is admitted.
    loaded_tokens: int = 0
    # Requests admitted with such tokens.
    load_requests: int = 0
    # Offloaded blocks whose store completed on every worker.
    stored_blocks: int = 0
    # Requests with stores in flight (now).
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


def on_admission(connector, callback: Callable[[Any, int], None]) -> None:
    """Call `callback(request, num_external_tokens)` for every request the
    scheduler admits (its Request), before the connector sees it.

    The scheduler calls the connector's update_state_after_alloc once per
    admitted request with the number of tokens the connector is to load
    (0 for none); every generation of the connector has it. The first call
    wraps the method on this instance, later ones add callbacks.
    """
    hooks = connector.__dict__.get(_ADMISSION_HOOKS)
    if hooks is None:
        hooks = []
        inner = connector.update_state_after_alloc

        def update_state_after_alloc(request, blocks, num_external_tokens):
            for hook in hooks:
                hook(request, num_external_tokens)
            return inner(request, blocks, num_external_tokens)

        connector.update_state_after_alloc = update_state_after_alloc
        setattr(connector, _ADMISSION_HOOKS, hooks)
    hooks.append(callback)
