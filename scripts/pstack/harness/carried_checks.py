"""`make test`'s part for a line without a CPU runtime (Line.runtime
NO_RUNTIME, such as the 0.33.0 line while vLLM 0.33 has no CPU build here):
its series is checked, not run.

Each check counts as one test:
  - check-series: the series applies to its release, re-exports byte for
    byte, and every patch is upstream-shaped;
  - the release's formatters (lint.py) on the Python files the series adds
    or changes, at the line's tip;
  - the release's offline pre-commit hooks (precommit.py) on those files,
    as pre-commit sees the whole series being committed on the release,
    in a scratch worktree (build/<version>/lint-tip): the checks `make pr`
    runs on each PR, here on the series as one.

Its vLLM tests, upstream's suites, the lm-eval gate and check-bisect need
the runtime; `make test` says so in one line and leaves them out.
"""

from __future__ import annotations

from ..core.errors import UserError, progress
from ..core.line import Line
from ..core.lint import LintResult
from ..core.precommit import lint_change
from ..core.vllm_src import SERIES
from ..queue.check_series import check_series
from .junit import Counts
from .line_parts import prepare_line


def check_carried(layout: Line) -> Counts:
    """The line set up (its tree, and its venv of linters) and checked: its
    part of `make test`, run beside the others from the start (it needs
    nothing they make)."""
    version = layout.version
    progress(f"line {version}: no CPU runtime (vLLM {version} published no "
             f"CPU wheel; docs/reports/{version}/line.md): its series is "
             "checked (applies, re-exports, upstream-shaped, linted by "
             "its release's hooks), not run")
    if not prepare_line(layout):
        return Counts(failed=1)
    return check_series_and_lint(layout)


def check_series_and_lint(layout: Line) -> Counts:
    """check-series, then each linter and hook at the tip: one test each."""
    counts = _check_series(layout)
    for result in lint_series_at_tip(layout):
        progress(f"{result.linter}: {result.summary}")
        if not result.ok:
            print(result.output.rstrip()[-3000:])
        counts += Counts(passed=int(result.ok), failed=int(not result.ok))
    return counts


def _check_series(layout: Line) -> Counts:
    try:
        check_series(layout)
    except UserError as e:
        print(f"error: check-series: {e}")
        return Counts(failed=1)
    return Counts(passed=1)  # check_series said so


def lint_series_at_tip(layout: Line) -> list[LintResult]:
    """The release's formatters and offline hooks on the files the series
    adds or changes, as pre-commit sees the whole series being committed on
    the release."""
    return lint_change(layout, layout.pin.tag, SERIES, "lint")
