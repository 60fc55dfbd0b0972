"""The offline pre-commit hooks `make pr` runs (core/precommit.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from pstack.core.precommit import Tools, hooks_for, run_hook

CONFIG = """repos:
- repo: https://github.com/crate-ci/typos
  rev: v1.43.5
  hooks:
  - id: typos
- repo: local
  hooks:
  - id: mypy # a comment, as vLLM 0.32's has
    entry: python tools/pre_commit/mypy.py "3.11"
  - id: check-spdx-header
    entry: python tools/pre_commit/check_spdx_header.py
"""
# A stand-in for vLLM's tools/pre_commit/mypy.py: prints the errors listed
# in errors.txt of its tree, as mypy does, and exits 1 if there are any.
FAKE_MYPY = """import sys
from pathlib import Path
errors = Path(__file__).parents[2] / "errors.txt"
lines = errors.read_text().splitlines() if errors.exists() else []
assert sys.argv[1] == "3.11", sys.argv
for line in lines:
    print(line)
sys.exit(1 if lines else 0)
"""


def _tree(root: Path, errors: list[str]) -> Path:
    (root / "tools" / "pre_commit").mkdir(parents=True)
    (root / ".pre-commit-config.yaml").write_text(CONFIG)
    (root / "tools" / "pre_commit" / "mypy.py").write_text(FAKE_MYPY)
    (root / "errors.txt").write_text("".join(e + "\n" for e in errors))
    (root / "vllm").mkdir()
    (root / "vllm" / "a.py").write_text("x = 1\n")
    return root


def _tools() -> Tools:
    return Tools(Path(sys.executable).parent.parent)


def test_the_hooks_a_tree_runs():
    here = Path(__file__).parent
    assert hooks_for(here) == ()


def test_hooks_whose_script_the_tree_lacks_are_not_run(tmp_path):
    tree = _tree(tmp_path, [])
    # check_spdx_header.py is not in the tree.
    assert hooks_for(tree) == ("typos", "mypy")


def test_mypy_fails_only_on_errors_the_change_adds(tmp_path):
    old = "vllm/a.py:3: error: Old problem  [misc]"
    base = _tree(tmp_path / "base", [old])
    moved = _tree(tmp_path / "same", [old.replace(":3:", ":9:")])
    assert run_hook("mypy", moved, base, ["vllm/a.py"], _tools()).ok
    new = "vllm/a.py:4: error: New problem  [misc]"
    worse = _tree(tmp_path / "worse", [old, new])
    result = run_hook("mypy", worse, base, ["vllm/a.py"], _tools())
    assert result.summary == "new errors in vllm/a.py"
    assert result.output == "vllm/a.py: error: New problem  [misc]"
