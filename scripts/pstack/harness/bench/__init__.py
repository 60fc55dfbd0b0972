"""`make bench`: the project's benchmarks, printed as tables (B=<name> for
one; LINE=<version> for another line's).

Figures are printed, never asserted: they depend on the machine. Each
benchmark is a module of this package with `run(layout)`, registered in
BENCHMARKS below; the measuring script it runs (in a vLLM tree) is in
scripts/benchmarks.
"""

from __future__ import annotations

import argparse

from ...core.errors import UserError
from ...core.line import UPSTREAM, Line
from . import (block_hashing, cross_layer, engine_throughput, fleet, fs_tier,
               host_transfer, offload_manager, serving, serving_upstream,
               step_overhead, tier_ttft, transfer)

# Name (B=) -> module, in the order `make bench` runs them.
BENCHMARKS = {
    "block-hashing": block_hashing,
    "offload-manager": offload_manager,
    "transfer": transfer,
    "cross-layer": cross_layer,
    "engine-throughput": engine_throughput,
    "step-overhead": step_overhead,
    "serving": serving,
}

# A line on a vLLM with offloading of its own (Line.generation UPSTREAM)
# carries the CPU platform for it, not the series' connector: its
# benchmarks measure that.
UPSTREAM_OFFLOADING_BENCHMARKS = {
    "transfer": host_transfer,
    "fs-tier": fs_tier,
    "ttft": tier_ttft,
    # TTFT again (for its chart), then the serving workloads.
    "serving": serving_upstream,
    # Three servers sharing an fs tier root against three with CPU tiers.
    "fleet": fleet,
}


def benchmarks_for(layout: Line) -> dict:
    if layout.generation == UPSTREAM:
        return UPSTREAM_OFFLOADING_BENCHMARKS
    return BENCHMARKS


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("names",
                        nargs="*",
                        metavar="name",
                        help="one of the line's benchmarks (default: all)")


def run(args: argparse.Namespace, layout: Line) -> int:
    benchmarks = benchmarks_for(layout)
    for name in args.names or list(benchmarks):
        if name not in benchmarks:
            raise UserError(
                f"unknown benchmark {name!r} for line {layout.version}",
                f"make bench B=<one of {', '.join(benchmarks)}>")
        benchmarks[name].run(layout)
    return 0
