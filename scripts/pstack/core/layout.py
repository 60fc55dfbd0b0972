"""Where the tooling reads and writes.

`REPO` is the checkout the tool lives in: its own files (benchmark scripts,
the lm-eval task, ci/) are found from there. Everything a maintained line of
the stack owns, its series and pin, its generated vllm-src, its venv and
what the commands write (docs/, build/, out/), is found through a `Layout`,
so that tests can point it elsewhere.

A checkout holds one line per vLLM release it maintains: the default line
in patches/ (with vllm-src/ and .venv/), and each other line next to it,
named by its release: patches-<version>/, vllm-src-<version>/ and
.venv-<version>/. `LINE=<version>` (PSTACK_LINE) picks one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import UserError
from .pin import BasePin

REPO = Path(__file__).resolve().parents[3]


def cache_dir() -> Path:
    """Downloads, ccache and models live outside the checkout, so that
    fresh clones reuse them."""
    if "PSTACK_CACHE" in os.environ:
        return Path(os.environ["PSTACK_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache"))
    return Path(xdg) / "vllm-kv-offload"


@dataclass(frozen=True)
class Layout:
    """The files of one line of the stack: a series on one vLLM base."""

    patches: Path
    src: Path
    cache: Path
    # The checkout around `patches` (docs/, build/, out/); default: the
    # parent of `patches`.
    root: Path | None = None
    # The CPU runtime with `src` installed editable.
    venv: Path = REPO / ".venv"

    def __post_init__(self) -> None:
        # Derived defaults of a frozen dataclass are set once, here.
        if self.root is None:
            object.__setattr__(self, "root", self.patches.parent)

    @classmethod
    def default(cls) -> Layout:
        """The checkout's default line, or the line PSTACK_LINE names,
        unless PSTACK_* variables say otherwise."""
        env = os.environ
        layout = cls(
            patches=Path(env.get("PSTACK_PATCHES", REPO / "patches")),
            src=Path(env.get("PSTACK_SRC", REPO / "vllm-src")),
            cache=cache_dir(),
            venv=Path(env.get("PSTACK_VENV", REPO / ".venv")),
        )
        version = env.get("PSTACK_LINE")
        return layout.existing_line(version) if version else layout

    def line(self, version: str) -> Layout:
        """The line on vLLM `version` next to this one (it may not exist
        yet)."""
        root = self.root
        assert root is not None
        return Layout(patches=root / f"patches-{version}",
                      src=root / f"vllm-src-{version}",
                      cache=self.cache,
                      root=root,
                      venv=root / f".venv-{version}")

    def default_line(self) -> Layout:
        """The checkout's default line: patches/, vllm-src/ and .venv/."""
        root = self.root
        assert root is not None
        if self.is_default_line:
            return self
        return Layout(patches=root / "patches",
                      src=root / "vllm-src",
                      cache=self.cache,
                      root=root,
                      venv=root / ".venv")

    def existing_line(self, version: str) -> Layout:
        """This line if it is on vLLM `version`, else the line of that
        version next to it, which must exist."""
        if _base_version(self.patches) == version:
            return self
        other = self.line(version)
        if _base_version(other.patches) == version:
            return other
        lines = ", ".join(f"{v} ({p.name}/)" for v, p in self.lines())
        raise UserError(
            f"this checkout has no line on vLLM {version}",
            f"its lines: {lines}; `make rebase TO={version}` "
            "carries the default line onto it")

    def lines(self) -> list[tuple[str, Path]]:
        """(version, patches directory) of each line of the checkout, the
        default one first."""
        assert self.root is not None
        found = [(_base_version(self.patches), self.patches)]
        for patches in sorted(self.root.glob("patches-*")):
            version = _base_version(patches)
            if version and patches != self.patches:
                found.append((version, patches))
        return [(v, p) for v, p in found if v]

    @property
    def series_file(self) -> Path:
        return self.patches / "series"

    @property
    def base_file(self) -> Path:
        return self.patches / "base.toml"

    @property
    def docs(self) -> Path:
        return self.root / "docs"

    def reports(self, version: str) -> Path:
        """The folder of the reports generated about vLLM `version`: the
        rebase report, its range-diff and conflicts, the carry's range-diff.

        >>> stack = Layout(Path("/c/patches"), Path("/c/vllm-src"), Path("/x"))
        >>> stack.reports("0.10.2").as_posix()
        '/c/docs/reports/0.10.2'
        """
        return reports_in(self.docs, version)

    @property
    def build(self) -> Path:
        """Scratch trees and records, ignored by git."""
        return self._own("build")

    @property
    def out(self) -> Path:
        """Results for people to read (PR material, lm-eval reports)."""
        return self._own("out")

    @property
    def dist(self) -> Path:
        """The wheels `make wheel` builds."""
        return self._own("dist")

    def _own(self, name: str) -> Path:
        """root/<name> for the default line; root/<name>/<version> for a
        line next to it, so the lines' results and scratch trees stay
        apart."""
        assert self.root is not None
        if self.is_default_line:
            return self.root / name
        return self.root / name / self.patches.name.removeprefix("patches-")

    @property
    def check_results(self) -> Path:
        """What `make check-bisect` recorded per tree (`make pr` quotes it)."""
        return self.build / "check-bisect.json"

    @property
    def is_default_line(self) -> bool:
        """Whether this is the checkout's default line (patches/), not one
        next to it (patches-<version>/)."""
        return self.patches == self.root / "patches"

    @property
    def venv_python(self) -> Path:
        return self.venv / "bin" / "python"


def reports_in(docs: Path, version: str) -> Path:
    """docs/reports/<version>/: one folder per release, under `docs`.

    >>> reports_in(Path("docs"), "0.10.0").as_posix()
    'docs/reports/0.10.0'
    """
    return docs / "reports" / version


def _base_version(patches: Path) -> str | None:
    """The vLLM version a line's base.toml pins, if it has one."""
    base = patches / "base.toml"
    return BasePin.load(base).version if base.is_file() else None
