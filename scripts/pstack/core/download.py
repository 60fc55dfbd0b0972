"""Pinned vLLM release files (sdist or wheel), through pip's configured
index, verified by sha256.

`pip download --no-binary :all: vllm==X` cannot be used for the sdist: pip
builds its metadata, and vLLM's setup.py appends a device suffix (`+cu126`,
`+cpu`) to the version, which pip rejects as inconsistent with the file
name. So we ask pip's own package finder for the file by name (same index
URLs, certificates and proxies as `pip download`) and download it with
pip's session, then verify the pinned sha256. Files are cached by name.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from .errors import UserError, progress
from .pin import BasePin

PROJECT = "vllm"


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _candidates(binary: bool | None):
    """(links of every file the configured index has for vLLM, pip's
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
    opts, _ = cmd.parse_args(["--no-deps", *kind, PROJECT])
    with cmd.main_context():
        session = cmd.get_default_session(opts)
        finder = cmd._build_package_finder(options=opts,
                                           session=session,
                                           target_python=None,
                                           ignore_requires_python=True)
        links = [c.link for c in finder.find_all_candidates(PROJECT)]
        return links, session


def _find_and_download(filename: str, dest: Path) -> None:
    links, session = _candidates(binary=filename.endswith(".whl"))
    links = [link for link in links if link.filename == filename]
    if not links:
        raise UserError(
            f"{filename} is not on the configured package index",
            "check the version in patches/base.toml "
            "(`pip index versions vllm`)")
    tmp = dest.with_name(dest.name + ".part")
    progress(f"downloading {filename}")
    resp = session.get(links[0].url, stream=True)
    if resp.status_code != 200:
        raise UserError(
            f"download of {filename} failed: HTTP {resp.status_code}")
    with open(tmp, "wb") as f:
        for chunk in resp.iter_content(1 << 20):
            f.write(chunk)
    tmp.replace(dest)


def find_release(version: str, like: BasePin) -> BasePin:
    """The pin of another release: its sdist and the wheel of the same kind
    as `like`'s, with the sha256 the index publishes (checked again on
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
    hashes = {}
    for name in (sdist, wheel):
        link = by_name[name]
        if link.hash_name != "sha256" or not link.hash:
            raise UserError(
                f"the index publishes no sha256 for {name}",
                "download it, check it, and pin it in patches/base.toml "
                "by hand")
        hashes[name] = link.hash
    return BasePin(version=version,
                   sdist=sdist,
                   sdist_sha256=hashes[sdist],
                   wheel=wheel,
                   wheel_sha256=hashes[wheel])


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
