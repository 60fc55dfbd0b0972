"""The shape of scripts/pstack: imports go one way (core <- queue <- install <-
harness <- cli), without cycles or private names across modules, and the
patch queue needs nothing outside the standard library.

`python tests/test_structure.py` prints the import graph.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "scripts" / "pstack"
LAYERS = ("core", "queue", "install", "harness")  # lowest first
# Besides the standard library: pip's package finder fetches the base files.
STDLIB_EXTRAS = {"pip"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(name: str, path: Path, known: set[str]) -> list[tuple[str, str]]:
    """(imported module, imported name or '') of every import in the file,
    at any depth; relative imports resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(alias.name, "") for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[:len(package.split(".")) -
                                            node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in known:  # `from package import module`
                    found.append((submodule, ""))
                else:
                    found.append((base, alias.name))
    return found


def graph() -> dict[str, set[str]]:
    """Module -> the pstack modules it imports."""
    mods = modules()
    return {
        name:
        {m
         for m, _ in imports(name, path, set(mods)) if m in mods} - {name}
        for name, path in mods.items()
    }


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles (one path around each), by depth-first search."""
    found, done = [], set()

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            found.append(path[path.index(node):] + [node])
            return
        if node in done:
            return
        for nxt in sorted(edges[node]):
            visit(nxt, path + [node])
        done.add(node)

    for node in sorted(edges):
        visit(node, [])
    return found


def layer(module: str) -> int:
    """0 for core ... 3 for harness; 4 for the command line on top."""
    part = module.split(".")[1] if "." in module else ""
    return LAYERS.index(part) if part in LAYERS else len(LAYERS)


def test_the_import_graph_has_no_cycle():
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({
        "a": {"b"},
        "b": {"c"},
        "c": {"a"},
        "d": set()
    }) == [["a", "b", "c", "a"]]


def test_modules_import_only_their_layer_or_lower_ones():
    upward = [(m, dep) for m, deps in graph().items() for dep in deps
              if layer(dep) > layer(m)]
    assert upward == []


def test_no_module_imports_private_names_of_another():
    mods = modules()
    private = [
        (name, f"{module}.{imported}") for name, path in mods.items()
        for module, imported in imports(name, path, set(mods))
        if module in mods and module != name and imported.startswith("_")
    ]
    assert private == []


def test_core_and_queue_need_only_the_standard_library():
    mods = modules()
    allowed = set(sys.stdlib_module_names) | STDLIB_EXTRAS | {"pstack"}
    outside = sorted({(name, module)
                      for name, path in mods.items() if layer(name) <= 1
                      for module, _ in imports(name, path, set(mods))
                      if module.split(".")[0] not in allowed})
    assert outside == []


if __name__ == "__main__":
    edges = graph()
    for name in sorted(edges, key=lambda m: (layer(m), m)):
        print(f"{name} -> {', '.join(sorted(edges[name])) or '-'}")
    found = cycles(edges)
    print(f"{len(edges)} modules, "
          f"{sum(len(d) for d in edges.values())} imports, "
          f"{len(found)} cycles" + "".join(f"\n  {' -> '.join(c)}"
                                           for c in found))
    sys.exit(1 if found else 0)
