"""Where the tooling reads and writes.

`REPO` is the checkout the tool lives in: its own files (benchmark scripts,
the lm-eval task, ci/) are found from there. Everything a maintained line of
the stack owns, its series and pin, its generated vllm-src, its venv and
what the commands write (docs/, build/, out/), is found through a `Layout`,
so that tests (and a second line, some day) can point it elsewhere.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

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
        """The checkout's own line, unless PSTACK_* variables say otherwise."""
        env = os.environ
        return cls(
            patches=Path(env.get("PSTACK_PATCHES", REPO / "patches")),
            src=Path(env.get("PSTACK_SRC", REPO / "vllm-src")),
            cache=cache_dir(),
            venv=Path(env.get("PSTACK_VENV", REPO / ".venv")),
        )

    @property
    def series_file(self) -> Path:
        return self.patches / "series"

    @property
    def base_file(self) -> Path:
        return self.patches / "base.toml"

    @property
    def docs(self) -> Path:
        return self.root / "docs"

    @property
    def build(self) -> Path:
        """Scratch trees and records, ignored by git."""
        return self.root / "build"

    @property
    def out(self) -> Path:
        """Results for people to read (PR material, lm-eval reports)."""
        return self.root / "out"

    @property
    def readme(self) -> Path:
        return self.root / "README.md"

    @property
    def check_results(self) -> Path:
        """What `make check-bisect` recorded per tree (`make pr` quotes it)."""
        return self.build / "check-bisect.json"

    @property
    def venv_python(self) -> Path:
        return self.venv / "bin" / "python"
