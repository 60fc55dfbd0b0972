"""Step 1 of `make setup`: the Debian packages a line's runtime needs
(numa.h for vLLM's CPU extension, ccache, a C++ compiler, git)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from ..core.errors import UserError, progress
from ..core.proc import run_process

APT_PACKAGES = {
    "libnuma-dev": "/usr/include/numa.h",
    "ccache": None,
    "g++": None,
    "git": None
}


def _dpkg_installed(pkg: str) -> bool:
    proc = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg],
                          stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL,
                          text=True)
    return proc.returncode == 0 and "install ok installed" in proc.stdout


def ensure_apt_packages() -> None:
    if shutil.which("dpkg-query") is None:
        missing = [
            p for p, probe in APT_PACKAGES.items()
            if probe and not Path(probe).exists()
        ]
        if missing:
            raise UserError(f"missing system packages: {', '.join(missing)}",
                            "install them with your package manager")
        return
    missing = [p for p in APT_PACKAGES if not _dpkg_installed(p)]
    if not missing:
        return
    if os.geteuid() != 0:
        raise UserError(f"missing Debian packages: {', '.join(missing)}",
                        f"sudo apt-get install -y {' '.join(missing)}")
    progress(f"installing Debian packages: {', '.join(missing)}")
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    run_process(["apt-get", "update", "-q"], env=env)
    run_process([
        "apt-get", "install", "-y", "-q", "--no-install-recommends", *missing
    ],
                env=env)
