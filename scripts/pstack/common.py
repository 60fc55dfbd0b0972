"""Paths, the base pin, process helpers and the error type every command uses."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


class UserError(Exception):
    """A failure the user can act on: printed as one line plus a hint, no traceback."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint


@dataclass(frozen=True)
class Paths:
    """Where the tooling reads and writes. Tests point these at scratch dirs."""

    patches: Path
    src: Path
    cache: Path

    @classmethod
    def default(cls) -> "Paths":
        return cls(
            patches=Path(os.environ.get("PSTACK_PATCHES", REPO / "patches")),
            src=Path(os.environ.get("PSTACK_SRC", REPO / "vllm-src")),
            cache=cache_dir(),
        )

    @property
    def series_file(self) -> Path:
        return self.patches / "series"

    @property
    def base_file(self) -> Path:
        return self.patches / "base.toml"


def cache_dir() -> Path:
    """Downloads, ccache and models live outside the checkout so fresh clones reuse them."""
    if "PSTACK_CACHE" in os.environ:
        return Path(os.environ["PSTACK_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache"))
    return Path(xdg) / "vllm-kv-offload"


@dataclass(frozen=True)
class Release:
    """A release imported on branch `upstream`: its version and verified sdist."""

    version: str
    sdist: str
    sdist_sha256: str

    @property
    def tag(self) -> str:
        return f"v{self.version}"


@dataclass(frozen=True)
class BasePin:
    version: str
    sdist: str
    sdist_sha256: str
    wheel: str
    wheel_sha256: str
    # Releases imported before this one (oldest first). `make rebase` imports a
    # release as the child of the previous base, so `make apply` re-imports the
    # same chain to get the same commit ids (and base-commit trailers) everywhere.
    previous: tuple[Release, ...] = ()

    FIELDS = ("version", "sdist", "sdist_sha256", "wheel", "wheel_sha256")

    @property
    def tag(self) -> str:
        return f"v{self.version}"

    @property
    def release(self) -> Release:
        return Release(self.version, self.sdist, self.sdist_sha256)

    @classmethod
    def load(cls, path: Path) -> "BasePin":
        try:
            data = tomllib.loads(path.read_text())
        except FileNotFoundError:
            raise UserError(f"base pin {path} is missing",
                            "restore it with `git checkout -- patches/base.toml`")
        except tomllib.TOMLDecodeError as e:
            raise UserError(f"base pin {path} is not valid TOML: {e}")
        missing = [f for f in cls.FIELDS if f not in data]
        if missing:
            raise UserError(f"base pin {path} lacks {', '.join(missing)}")
        try:
            previous = tuple(Release(str(r["version"]), str(r["sdist"]),
                                     str(r["sdist_sha256"]))
                             for r in data.get("previous", []))
        except (KeyError, TypeError) as e:
            raise UserError(f"base pin {path}: bad `previous` entry ({e})",
                            "each needs version, sdist and sdist_sha256")
        return cls(**{f: str(data[f]) for f in cls.FIELDS}, previous=previous)

    def dump(self, path: Path) -> None:
        lines = [
            "# The vLLM release the series in `series` applies to.",
            "# Written by `make rebase`; read by every other target. Hashes are sha256.",
        ]
        lines += [f'{f} = "{getattr(self, f)}"' for f in self.FIELDS]
        if self.previous:
            lines += ["# Earlier bases, oldest first: `make apply` imports them too, as the",
                      "# ancestors of this one on branch upstream (same commit ids everywhere).",
                      "previous = ["]
            lines += [f'    {{ version = "{r.version}", sdist = "{r.sdist}", '
                      f'sdist_sha256 = "{r.sdist_sha256}" }},' for r in self.previous]
            lines.append("]")
        path.write_text("\n".join(lines) + "\n")


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def run(cmd: list[str | Path], *, cwd: Path | None = None, env: dict | None = None,
        check: bool = True, capture: bool = False, input: str | None = None,
        ) -> subprocess.CompletedProcess:
    full_env = None
    if env is not None:
        full_env = {**os.environ, **env}
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=full_env, check=check,
                          text=True, input=input,
                          stdout=subprocess.PIPE if capture else None,
                          stderr=subprocess.PIPE if capture else None)


# Identity and dates are fixed so that imports and exports are byte-stable
# across machines and users.
GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "vLLM release import",
    "GIT_AUTHOR_EMAIL": "noreply@vllm.invalid",
    "GIT_COMMITTER_NAME": "vLLM release import",
    "GIT_COMMITTER_EMAIL": "noreply@vllm.invalid",
}


def git(src: Path, *args: str, check: bool = True, env: dict | None = None,
        input: str | None = None) -> str:
    """Run git in `src` and return stdout; stderr is kept for the error message."""
    proc = subprocess.run(["git", "-C", str(src), *args], text=True, input=input,
                          env={**os.environ, **(env or {})},
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if check and proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, proc.args, proc.stdout,
                                            proc.stderr)
    return proc.stdout


def progress(msg: str) -> None:
    print(f"==> {msg}", flush=True)


def main_wrapper(fn) -> None:
    """Run a command's main, turning UserError into a one-line message and exit 2."""
    try:
        rc = fn(sys.argv[1:])
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        if e.hint:
            print(f"  next: {e.hint}", file=sys.stderr)
        sys.exit(2)
    except subprocess.CalledProcessError as e:
        cmd = " ".join(map(str, e.cmd))
        print(f"error: command failed ({e.returncode}): {cmd}", file=sys.stderr)
        if e.stderr:
            print(e.stderr.rstrip()[-2000:], file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted; re-run the same command to continue", file=sys.stderr)
        sys.exit(130)
    sys.exit(rc or 0)
