"""The offline pre-commit hooks `make pr` runs (core/precommit.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from pstack.core.precommit import NOT_RUN, Tools, hooks_for, run_hook

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


# vLLM 0.32's hook, as its config has it, and a stand-in for its script:
# a plain `import re` is forbidden (`import regex as re` is the way).
FORBIDDEN_IMPORTS = """
  - id: check-forbidden-imports
    name: Check for forbidden imports
    entry: python tools/pre_commit/check_forbidden_imports.py
    language: python
    types: [python]
    additional_dependencies: [regex]
"""
FAKE_FORBIDDEN_IMPORTS = """import sys
bad = [f for f in sys.argv[1:] if "import re\\n" in open(f).read()]
for f in bad:
    print(f"{f}:1: error: Found forbidden import: re")
sys.exit(1 if bad else 0)
"""


def test_the_forbidden_imports_hook_runs_where_the_config_has_it(tmp_path):
    tree = _tree(tmp_path, [])
    config = tree / ".pre-commit-config.yaml"
    script = tree / "tools" / "pre_commit" / "check_forbidden_imports.py"
    script.write_text(FAKE_FORBIDDEN_IMPORTS)
    assert "check-forbidden-imports" not in hooks_for(tree)
    config.write_text(CONFIG + FORBIDDEN_IMPORTS)
    assert hooks_for(tree) == ("typos", "mypy", "check-forbidden-imports")
    (tree / "tests").mkdir()
    (tree / "tests" / "test_a.py").write_text("import re\n")
    (tree / "notes.txt").write_text("import re\n")
    result = run_hook("check-forbidden-imports", tree, tree,
                      ["tests/test_a.py", "notes.txt"], _tools())
    assert result.summary == "issues in tests/test_a.py"
    assert "notes.txt" not in result.output  # types: [python]
    (tree / "tests" / "test_a.py").write_text("import regex as re\n")
    assert run_hook("check-forbidden-imports", tree, tree, ["tests/test_a.py"],
                    _tools()).ok


def test_scripts_are_found_by_their_entry_and_some_are_left_out(tmp_path):
    # vLLM 0.9.2 and 0.10.2 keep the scripts in tools/; their mypy hooks
    # check whole directories and are not run.
    (tmp_path / "tools").mkdir()
    for name in ("check_spdx_header.py", "mypy.sh"):
        (tmp_path / "tools" / name).write_text("")
    (tmp_path / ".pre-commit-config.yaml").write_text("""repos:
- repo: local
  hooks:
  - id: mypy-local
    entry: tools/mypy.sh 0 "local"
  - id: check-spdx-header
    entry: python tools/check_spdx_header.py
  - id: check-filenames
    entry: bash
    always_run: true
    pass_filenames: false
""")
    assert hooks_for(tmp_path) == ("check-spdx-header", "check-filenames")
    assert "mypy-local" in NOT_RUN
    spaced = run_hook("check-filenames", tmp_path, tmp_path,
                      ["vllm/a b.py", "vllm/c.py"], _tools())
    assert spaced.summary == "issues in vllm/a b.py"


# A hook that takes no file names and checks the whole tree: it prints the
# lines of problems.txt, and fails if there are any.
WHOLE_TREE = """
  - id: check-whole-tree
    entry: python tools/pre_commit/whole_tree.py
    pass_filenames: false
"""
FAKE_WHOLE_TREE = """import sys
from pathlib import Path
assert sys.argv[1:] == [], sys.argv
lines = Path("problems.txt").read_text().splitlines()
print("\\n".join(lines))
sys.exit(1 if lines else 0)
"""


def test_a_whole_tree_hook_fails_only_on_what_the_release_lacks(tmp_path):
    trees = {}
    for name, problems in (("base", "old\n"), ("same", "old\n"),
                           ("worse", "old\nnew\n")):
        tree = trees[name] = _tree(tmp_path / name, [])
        (tree / ".pre-commit-config.yaml").write_text(CONFIG + WHOLE_TREE)
        (tree / "tools" / "pre_commit" /
         "whole_tree.py").write_text(FAKE_WHOLE_TREE)
        (tree / "problems.txt").write_text(problems)
    assert "check-whole-tree" in hooks_for(trees["base"])
    assert run_hook("check-whole-tree", trees["same"], trees["base"],
                    ["vllm/a.py"], _tools()).ok
    result = run_hook("check-whole-tree", trees["worse"], trees["base"],
                      ["vllm/a.py"], _tools())
    assert not result.ok and result.output == "new"
