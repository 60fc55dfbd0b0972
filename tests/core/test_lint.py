"""The linters of a tree: those of its own pre-commit configuration."""

from __future__ import annotations

from pathlib import Path

from pstack.core.lint import RUFF_ERA, YAPF_ERA, lint, linters_for

RUFF_ONLY = """\
- repo: https://github.com/astral-sh/ruff-pre-commit
  rev: v0.14.0
  hooks:
  - id: ruff-check
  - id: ruff-format
"""


def _tree(tmp_path: Path, config: str | None) -> Path:
    if config is not None:
        (tmp_path / ".pre-commit-config.yaml").write_text(config)
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\n")
    return tmp_path


def test_a_tree_formatted_by_yapf_is_linted_as_vllm_0_9_2(tmp_path):
    assert linters_for(_tree(tmp_path,
                             "  - id: yapf\n" + RUFF_ONLY)) == YAPF_ERA


def test_a_tree_without_pre_commit_is_linted_as_vllm_0_9_2(tmp_path):
    assert linters_for(_tree(tmp_path, None)) == YAPF_ERA


def test_a_tree_formatted_by_ruff_is_checked_by_ruff_format(tmp_path):
    tree = _tree(tmp_path, RUFF_ONLY)
    assert linters_for(tree) == RUFF_ERA
    (tree / "good.py").write_text('x = {"a": 1}\n')
    (tree / "bad.py").write_text("x = {  'a':1 }\n")
    assert lint("ruff-format", ["good.py"], tree).ok
    result = lint("ruff-format", ["good.py", "bad.py"], tree)
    assert not result.ok
    assert result.summary == "issues in bad.py"
