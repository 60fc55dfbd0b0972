"""`make setup` decisions that do not need a fresh machine to test."""

from __future__ import annotations

import shutil

import pytest
from pstack.build import setup_env
from pstack.core.errors import UserError
from pstack.core.layout import Layout
from pstack.core.pin import BasePin


def test_missing_apt_packages_without_root_name_the_install_command(
        monkeypatch):
    monkeypatch.setattr(setup_env, "_dpkg_installed",
                        lambda pkg: pkg != "libnuma-dev")
    monkeypatch.setattr(setup_env.os, "geteuid", lambda: 1000)
    with pytest.raises(UserError,
                       match="missing Debian packages: libnuma-dev") as err:
        setup_env.ensure_apt_packages()
    assert err.value.hint == "sudo apt-get install -y libnuma-dev"


def test_nothing_is_installed_when_packages_are_present(monkeypatch):
    monkeypatch.setattr(setup_env, "_dpkg_installed", lambda pkg: True)
    monkeypatch.setattr(setup_env, "run_process",
                        lambda *a, **k: pytest.fail("ran " + str(a)))
    setup_env.ensure_apt_packages()


def _fake_tree(root):
    (root / "csrc").mkdir(parents=True)
    (root / "csrc" / "cache.cpp").write_text("int x;\n")
    (root / "cmake").mkdir()
    (root / "cmake" / "utils.cmake").write_text("# cmake\n")
    (root / "CMakeLists.txt").write_text("project(x)\n")
    (root / "setup.py").write_text("# setup\n")
    (root / "vllm").mkdir()
    (root / "vllm" / "core.py").write_text("x = 1\n")
    return root


def test_extension_is_rebuilt_only_when_compiled_inputs_change(tmp_path):
    pin = BasePin("0.9.2", "s", "0" * 64, "w", "0" * 64)
    tree = _fake_tree(tmp_path / "src")
    key = setup_env.extension_key(tree, pin, "2.6.0")
    (tree / "vllm" / "core.py").write_text("x = 2\n")  # a Python-only patch
    assert setup_env.extension_key(tree, pin, "2.6.0") == key
    (tree / "csrc" / "cache.cpp").write_text("int y;\n")
    changed = setup_env.extension_key(tree, pin, "2.6.0")
    assert changed != key
    (tree / "cmake" / "utils.cmake").write_text("# other\n")
    assert setup_env.extension_key(tree, pin, "2.6.0") != changed


def test_build_environment_targets_cpu_without_avx512_downloads(tmp_path):
    layout = Layout(patches=tmp_path / "patches",
                    src=tmp_path / "src",
                    cache=tmp_path)
    env = setup_env.build_env(layout, "0.9.2+label")
    assert env["VLLM_TARGET_DEVICE"] == "cpu"
    assert env["VLLM_CPU_DISABLE_AVX512"] == "true"
    assert env["SETUPTOOLS_SCM_PRETEND_VERSION"] == "0.9.2+label"
    assert env["Torch_DIR"].endswith("ci/cmake")
    assert env["CCACHE_DIR"] == str(tmp_path / "ccache")


X86_RUNTIME = ('torch==2.6.0+cpu; platform_machine == "x86_64"\n'
               'intel_extension_for_pytorch==2.6.0; '
               'platform_machine == "x86_64"\n')


def _two_lines(root, other_runtime: str) -> tuple[Layout, Layout]:
    """A checkout with a default line and a 0.10.2 line whose vLLM trees
    have these requirements/cpu.txt."""
    default = Layout(patches=root / "patches",
                     src=root / "vllm-src",
                     cache=root / "cache",
                     venv=root / ".venv")
    line = default.line("0.10.2")
    for layout, cpu in ((default, X86_RUNTIME), (line, other_runtime)):
        (layout.src / "requirements").mkdir(parents=True)
        (layout.src / "requirements" /
         "cpu.txt").write_text("-r common.txt\nnumba == 0.61.2\n" + cpu)
    return default, line


def test_a_line_on_the_same_torch_and_ipex_shares_the_default_runtime(
        tmp_path):
    default, line = _two_lines(tmp_path, X86_RUNTIME)
    assert setup_env.shared_runtime(line) == default
    assert setup_env.shared_runtime(default) is None


def test_a_line_on_another_torch_gets_a_runtime_of_its_own(tmp_path):
    _, line = _two_lines(tmp_path, X86_RUNTIME.replace("2.6.0+cpu",
                                                       "2.8.0+cpu"))
    assert setup_env.shared_runtime(line) is None


def test_the_shared_runtime_comes_after_the_lines_own_packages(tmp_path):
    default, line = _two_lines(tmp_path, X86_RUNTIME)
    for venv in (default.venv, line.venv):
        (venv / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    setup_env.link_runtime(line, default)
    own = line.venv / "lib" / "python3.11" / "site-packages"
    # A .pth line is appended to sys.path, after the venv's site-packages:
    # the line's own transformers wins over the shared one.
    assert (own / setup_env.SHARED_PTH).read_text() == (
        f"{default.venv.resolve()}/lib/python3.11/site-packages\n")


def test_a_sharing_line_builds_with_the_shared_cmake_and_ninja(tmp_path):
    default, line = _two_lines(tmp_path, X86_RUNTIME)
    path = setup_env.build_env(line, "0.10.2", default)["PATH"].split(":")
    assert path[:2] == [str(line.venv / "bin"), str(default.venv / "bin")]


def test_a_sharing_line_runs_the_shared_ruff(tmp_path):
    default, line = _two_lines(tmp_path, X86_RUNTIME)
    for venv in (default.venv, line.venv):
        (venv / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
        (venv / "bin").mkdir()
    (default.venv / "bin" / "ruff").write_text("ELF\n")
    setup_env.link_runtime(line, default)
    assert (line.venv / "bin" / "ruff").resolve() == (default.venv / "bin" /
                                                      "ruff").resolve()


def test_a_line_before_the_default_one_is_set_up_says_what_to_run(tmp_path):
    default, line = _two_lines(tmp_path, X86_RUNTIME)
    shutil.rmtree(default.src)
    with pytest.raises(UserError, match="vllm-src is not materialized") as e:
        setup_env.shared_runtime(line)
    assert e.value.hint == "run `make setup` (the default line) first"
