"""`make sync` (run by `make setup` and `make test`): bring vllm-src up to
date with patches/, unless it holds work of its own.

A fresh clone gets vllm-src applied; a developer's vllm-src with local
commits or edits is used as it is.
"""

from __future__ import annotations

import argparse

from ..core.errors import UserError, progress
from ..core.line import Line
from ..core.vllm_src import VllmSrc
from .apply import apply
from .guard import ensure_safe_to_reset


def configure(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace, layout: Line) -> int:
    sync(layout)
    return 0


def sync(layout: Line) -> None:
    if VllmSrc(layout.src).exists():
        try:
            ensure_safe_to_reset(layout, layout.pin)
        except UserError as e:
            progress(f"using vllm-src as it is: {e}")
            return
    apply(layout)
