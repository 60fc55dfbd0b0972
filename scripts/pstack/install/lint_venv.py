"""The venv of a line without a CPU runtime (Line.runtime NO_RUNTIME): the
offline linters of its release's .pre-commit-config.yaml only, so that
`make pr` and `make test` lint its series as vLLM's pre-commit would.

It holds ruff at the hook's rev, typos, and the packages each hook that
runs offline adds (`additional_dependencies`: mypy with its stubs and
pydantic, PyYAML, regex), and no vLLM nor torch: as pre-commit runs them,
each in an environment of its own packages, so that mypy judges the series
as vLLM's pre-commit does. Nothing in it runs the line."""

from __future__ import annotations

from ..core.errors import UserError, progress
from ..core.line import Line
from ..core.precommit import hooks_for
from .line_venv import ensure_venv, pip, stamp, stamp_matches
from .wheel_runtime import (HOOK, HOOK_DEPENDENCIES, lint_tools,
                            requirement_name, ruff_version)


def hook_dependencies(config: str, hooks: tuple[str, ...]) -> list[str]:
    """The `additional_dependencies` of the named hooks of a
    .pre-commit-config.yaml, each package once (the first hook's
    requirement for it).

    >>> hook_dependencies("  - id: a\\n    additional_dependencies: [PyYAML]"
    ...                   "\\n  - id: b\\n    additional_dependencies: "
    ...                   "[pyyaml, regex]\\n  - id: c\\n"
    ...                   "    additional_dependencies: [x]\\n", ("a", "b"))
    ['PyYAML', 'regex']
    """
    found: dict[str, str] = {}
    for hook_id, body in HOOK.findall(config):
        listed = HOOK_DEPENDENCIES.search(body)
        if hook_id not in hooks or not listed:
            continue
        for item in listed.group(1).split(","):
            requirement = item.strip().strip("'\"")
            if requirement:
                found.setdefault(requirement_name(requirement), requirement)
    return list(found.values())


def lint_requirements(layout: Line) -> list[str]:
    """ruff, typos and what the line's offline hooks add, as
    requirements."""
    config = layout.src / ".pre-commit-config.yaml"
    text = config.read_text() if config.exists() else ""
    ruff = ruff_version(text)
    if ruff is None:
        raise UserError(
            f"{config} names no ruff-pre-commit rev: the ruff the line lints "
            "with is unknown", "check the ruff hook of that file")
    tools = [f"ruff=={ruff}", *lint_tools(text, leave_out=())]
    named = {requirement_name(t) for t in tools}
    added = hook_dependencies(text, hooks_for(layout.src))
    return tools + [r for r in added if requirement_name(r) not in named]


def setup_lint_venv(layout: Line) -> None:
    progress(f"line {layout.version} has no CPU runtime (vLLM "
             f"{layout.version} published no CPU wheel; "
             f"docs/reports/{layout.version}/line.md): {layout.venv.name} "
             "holds the linters of its pre-commit config only")
    ensure_venv(layout)
    tools = lint_requirements(layout)
    key = " ".join(tools)
    if stamp_matches(layout.venv, "lint-tools", key):
        return
    progress(f"installing the linters into {layout.venv.name}: {key}")
    pip(layout, "install", "--progress-bar", "off", *tools)
    stamp(layout.venv, "lint-tools").write_text(key + "\n")
