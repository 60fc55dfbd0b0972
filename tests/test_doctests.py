"""The examples in scripts/pstack's docstrings (`>>>` lines) hold.

Every module whose source has an example is collected, imported by its name
(conftest.py puts scripts/ on the path) and run through doctest; the test
ids name the modules: `pytest tests/test_doctests.py -v` lists them.
"""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "scripts" / "pstack"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules_with_examples() -> list[str]:
    return [
        module_name(path) for path in sorted(PACKAGE.rglob("*.py"))
        if ">>>" in path.read_text()
    ]


def test_modules_with_examples_are_found():
    found = modules_with_examples()
    assert {"pstack.core.patch", "pstack.core.markers"} <= set(found)


@pytest.mark.parametrize("name", modules_with_examples())
def test_docstring_examples_hold(name: str):
    module = importlib.import_module(name)
    # Failures are printed (pytest shows them with the failed test).
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name}: '>>>' outside a docstring"
    assert result.failed == 0, f"{name}: {result.failed} example(s) failed"
