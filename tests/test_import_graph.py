"""The package's modules import each other without a cycle.

The graph holds the imports that run when a module loads: its top-level ``import`` and
``from ... import`` statements (those under a module-level ``if``/``try`` too), but not those
under ``if TYPE_CHECKING:`` nor those inside functions, which run later, once every module is
loaded. ``from . import x`` counts as an import of the submodule ``x`` where one exists, not of the
package itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "avdenoise_vs"
NAME = PACKAGE.name


def _module_name(path: Path) -> str:
    parts = (NAME, *path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _load_time_imports(body: list[ast.stmt]):
    """The import statements of `body` that run at load, nested blocks included."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _load_time_imports(node.body)
            yield from _load_time_imports(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, *(h.body for h in node.handlers), node.orelse):
                yield from _load_time_imports(block)
            yield from _load_time_imports(node.finalbody)
        elif isinstance(node, ast.With):
            yield from _load_time_imports(node.body)


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The package's modules that `node`, in `module`, loads."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            is_package = MODULES[module].name == "__init__.py"
            parts = module.split(".")
            base = parts[: len(parts) - node.level + is_package]
            source = ".".join([*base, node.module] if node.module else base)
        else:
            source = node.module or ""
        # ``from p import m`` loads the submodule p.m; ``from p import name`` loads p itself.
        names = [
            f"{source}.{alias.name}" if f"{source}.{alias.name}" in MODULES else source
            for alias in node.names
        ]
    found = set()
    for name in names:
        # Importing a.b.c loads a and a.b first: the nearest existing module stands for it.
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name.startswith(NAME) and name != module:
            found.add(name)
    return found


def import_graph() -> dict[str, set[str]]:
    graph = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        graph[module] = set().union(
            *(_targets(module, node) for node in _load_time_imports(tree.body))
        )
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as a path that ends where it starts, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_graph_sees_the_package() -> None:
    graph = import_graph()
    assert "avdenoise_vs._params.dropin" in graph
    assert "avdenoise_vs._params.spec" in graph["avdenoise_vs._params.dropin"]
    assert "avdenoise_vs._params.denoise" in graph["avdenoise_vs._params.dropin"]


def test_find_cycle_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle)


def _part(module: str) -> str:
    """The part of the package `module` belongs to: its folder, or itself at the root."""
    return module.split(".")[1] if "." in module else module


def test_no_cycle_between_the_parts() -> None:
    """The folders are layers: no part imports one that imports it back, however indirectly."""
    parts: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        for target in targets:
            if _part(module) != _part(target):
                parts.setdefault(_part(module), set()).add(_part(target))
    cycle = find_cycle(parts)
    assert cycle is None, " -> ".join(cycle)
