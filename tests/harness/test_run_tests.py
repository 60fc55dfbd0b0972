"""`make test`'s split of a line's vLLM test files into pytest runs."""

from __future__ import annotations

from pstack.harness.run_tests import pytest_batches


def test_files_with_in_process_engines_run_in_a_process_of_their_own(tmp_path):
    files = {
        "tests/test_unit.py": "def test_a():\n    pass\n",
        "tests/test_engine.py": "llm = LLM(model=MODEL)\n",
        "tests/test_env.py": 'setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")\n',
        "tests/test_helpers_of_another.py":
        "from .test_engine import make_llm\n",
        "tests/test_other_unit.py": "from vllm import LLM  # a type only\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert pytest_batches(tmp_path, list(files)) == [
        ["tests/test_unit.py", "tests/test_other_unit.py"],
        ["tests/test_engine.py"],
        ["tests/test_env.py"],
        ["tests/test_helpers_of_another.py"],
    ]
