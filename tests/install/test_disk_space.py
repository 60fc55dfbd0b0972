"""The free-space check before a runtime's install (disk_space.py), and
the setups that make it before their first download."""

from __future__ import annotations

import shutil
from collections import namedtuple

import pytest
from pstack.core.errors import UserError
from pstack.core.line import Line
from pstack.core.pin import BasePin
from pstack.install import disk_space, line_venv, source_runtime, wheel_runtime
from pstack.install.disk_space import GB, InstallSize, check_free_space

SIZE = InstallSize("a runtime", 3 * GB, 7 * GB)
Usage = namedtuple("Usage", "total used free")


def _free(monkeypatch, free_by_folder: dict):
    """disk_usage answering `free` for the folders given, by name."""

    def usage(path):
        return Usage(0, 0, free_by_folder[path.name])

    monkeypatch.setattr(disk_space.shutil, "disk_usage", usage)


@pytest.fixture
def folders(tmp_path):
    (tmp_path / "tmp").mkdir()
    (tmp_path / "work").mkdir()
    return tmp_path / "tmp", tmp_path / "work"


def test_one_filesystem_for_downloads_and_venv_needs_both(
        folders, monkeypatch):
    temp, work = folders
    # The venv does not exist yet: its nearest existing folder is asked.
    venv = work / ".venv-0.9.2"
    _free(monkeypatch, {"tmp": 10 * GB - 1, "work": 10 * GB - 1})
    with pytest.raises(UserError) as err:
        check_free_space(SIZE, venv, temp)
    assert str(err.value) == (f"10.0 GB free on the filesystem of {temp}; "
                              "installing a runtime needs about 10.0 GB there")
    assert "TMPDIR" in err.value.hint
    _free(monkeypatch, {"tmp": 10 * GB, "work": 10 * GB})
    check_free_space(SIZE, venv, temp)


def test_downloads_on_another_filesystem_need_their_part_only(
        folders, monkeypatch):
    temp, work = folders
    monkeypatch.setattr(disk_space, "_filesystem",
                        lambda path: hash(path.name))
    _free(monkeypatch, {"tmp": 3 * GB, "work": 7 * GB})
    check_free_space(SIZE, work / "venv", temp)
    _free(monkeypatch, {"tmp": 3 * GB, "work": 7 * GB - 1})
    with pytest.raises(UserError, match=f"of {work}; .* about 7.0 GB"):
        check_free_space(SIZE, work / "venv", temp)
    _free(monkeypatch, {"tmp": 3 * GB - 1, "work": 7 * GB})
    with pytest.raises(UserError, match=f"of {temp}; .* about 3.0 GB"):
        check_free_space(SIZE, work / "venv", temp)


def test_pips_temporary_folder_follows_tmpdir(folders, monkeypatch):
    temp, work = folders
    monkeypatch.setattr(disk_space, "_filesystem",
                        lambda path: hash(path.name))
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(disk_space.tempfile, "tempdir", None)
    _free(monkeypatch, {"tmp": 3 * GB - 1, "work": 7 * GB})
    with pytest.raises(UserError, match=f"of {temp}; "):
        check_free_space(SIZE, work / "venv")


def test_the_real_filesystem_answers(tmp_path):
    free = shutil.disk_usage(tmp_path).free
    check_free_space(InstallSize("nothing", 0, 0), tmp_path / "venv")
    with pytest.raises(UserError, match="installing all of it needs"):
        check_free_space(InstallSize("all of it", free, free),
                         tmp_path / "venv", tmp_path)


def _line(tmp_path, version: str) -> Line:
    return Line(patches=tmp_path / "lines" / version,
                src=tmp_path / "vllm-src",
                cache=tmp_path / "cache",
                venv=tmp_path / f".venv-{version}")


def _one_gb_free(monkeypatch):
    monkeypatch.setattr(disk_space.shutil, "disk_usage",
                        lambda path: Usage(0, 0, GB))


def test_a_runtime_too_big_for_the_disk_stops_before_pip_runs(
        tmp_path, monkeypatch):
    layout = _line(tmp_path, "0.9.2")
    (layout.src / "requirements").mkdir(parents=True)
    (layout.src / "requirements" / "common.txt").write_text("regex\n")
    layout.venv.mkdir()
    _one_gb_free(monkeypatch)
    monkeypatch.setattr(source_runtime, "run_process",
                        lambda *a, **k: pytest.fail(f"ran {a}"))
    with pytest.raises(UserError, match="1.0 GB free .* needs about 11.0 GB"):
        source_runtime.ensure_requirements(layout)
    # Installed before: nothing to download, nothing checked.
    key = line_venv.digest(source_runtime.REQUIREMENTS.read_bytes(),
                           source_runtime.CONSTRAINTS.read_bytes(), b"regex\n")
    line_venv.stamp(layout.venv, "deps").write_text(key + "\n")
    source_runtime.ensure_requirements(layout)


def test_a_wheel_runtime_too_big_for_the_disk_makes_no_venv(
        tmp_path, monkeypatch):
    layout = _line(tmp_path, "0.32.0")
    pin = BasePin("0.32.0", "s", "0" * 64, "w", "0" * 64, "c", "1" * 64)
    _one_gb_free(monkeypatch)
    with pytest.raises(UserError, match="1.0 GB free .* about 5.5 GB"):
        wheel_runtime.setup_wheel_runtime(layout, pin)
    assert not layout.venv.exists()
