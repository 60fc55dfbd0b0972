"""`make bench`: the project's benchmarks, printed as tables (B=<name> for
one).

Figures are printed, never asserted: they depend on the machine. Each
benchmark is a module of this package with `run(layout)`, registered in
BENCHMARKS below; the measuring script it runs (in a vLLM tree) is in
scripts/benchmarks.
"""

from __future__ import annotations

import argparse

from ...core.errors import UserError
from ...core.layout import Layout
from . import (block_hashing, cross_layer, engine_throughput, offload_manager,
               serving, step_overhead, transfer)

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


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("names",
                        nargs="*",
                        metavar="name",
                        help=f"one of {', '.join(BENCHMARKS)} (default: all)")


def run(args: argparse.Namespace, layout: Layout) -> int:
    for name in args.names or list(BENCHMARKS):
        if name not in BENCHMARKS:
            raise UserError(f"unknown benchmark {name!r}",
                            f"make bench B=<one of {', '.join(BENCHMARKS)}>")
        BENCHMARKS[name].run(layout)
    return 0
