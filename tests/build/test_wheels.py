"""The wheel overlay and the checks run on every built wheel.

Unit tests use a small fake "official" wheel; the slow test builds the real
wheels of the current series exactly as `make wheel` does.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

import pytest
from conftest import commit_change
from pstack.build.wheels import (Change, build_all, build_cuda_wheel,
                                 check_overlay_safe, series_changes,
                                 verify_wheel)
from pstack.core.errors import UserError
from pstack.core.layout import Layout
from pstack.core.pin import BasePin
from pstack.core.series import series_label
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
    files = {
        **files,
        "vllm/_version.py":
        b"__version__ = '0.0.1'\n",
        "vllm/_C.abi3.so":
        so,
        "vllm-0.0.1.dist-info/METADATA":
        b"Metadata-Version: 2.1\nName: vllm\nVersion: 0.0.1\n",
        "vllm-0.0.1.dist-info/WHEEL":
        b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
        b"Tag: cp38-abi3-linux_x86_64\n",
    }
    record = [_record_line(n, d) for n, d in files.items()]
    record.append("vllm-0.0.1.dist-info/RECORD,,")
    files["vllm-0.0.1.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)


@pytest.fixture
def wheel_stack(stack) -> Layout:
    """The fake release with a matching fake official wheel pinned."""
    src_files = {
        "vllm/__init__.py": b"from ._version import __version__\n",
        "vllm/version.py": b"__version__ = '0.0.1'\n",
        "vllm/core.py": "".join(f"line {i}\n" for i in range(1, 21)).encode(),
    }
    wheel = stack.cache / "dist" / "vllm-0.0.1-cp38-abi3-linux_x86_64.whl"
    make_official_wheel(wheel, src_files)
    pin = BasePin.load(stack.base_file)
    BasePin(
        **{
            **pin.__dict__, "wheel": wheel.name,
            "wheel_sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()
        }).dump(stack.base_file)
    apply(stack)
    return stack


def test_label_is_derived_from_series_and_never_says_cpu(wheel_stack):
    empty = series_label(wheel_stack)
    assert empty.startswith("kvoffload.0.g")
    commit_change(wheel_stack.src, "vllm/core.py", "line 3\n", "line three\n",
                  "[Core] One")
    export(wheel_stack)
    one = series_label(wheel_stack)
    assert one.startswith("kvoffload.1.g") and one != empty
    assert "cpu" not in one and "-" not in one


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


def _series_with_add_modify_delete(paths: Layout) -> list[Change]:
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
    assert any("vllm/_C.abi3.so: differs from the official wheel" in p
               for p in problems)


def _lines() -> list[str]:
    """The checkout's lines by version, the default one first."""
    return [version for version, _ in Layout.default().lines()]


@pytest.mark.slow
@pytest.mark.network
@pytest.mark.parametrize("version", _lines())
def test_real_wheels_of_the_current_series(tmp_path, version):
    """`make wheel` for real, on every line: the official CUDA wheel
    overlaid, the CPU wheel built (in the line's venv)."""
    paths = Layout.default().existing_line(version)
    if not (paths.src / ".git").exists() or not paths.venv_python.exists():
        pytest.fail(f"{paths.src.name} or {paths.venv.name} is not set up; "
                    "`make test` sets up every line first")
    pin = BasePin.load(paths.base_file)
    label = series_label(paths)
    built = build_all(paths, tmp_path,
                      "all")  # raises if any wheel fails its checks
    names = sorted(w.name for w in built)
    assert names == sorted([
        f"vllm-{pin.version}+{label}-cp38-abi3-linux_x86_64.whl",
        f"vllm-{pin.version}+{label}.cpu-cp311-cp311-linux_x86_64.whl"
    ])
