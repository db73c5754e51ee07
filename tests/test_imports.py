"""The package's modules import each other without a cycle.

A cycle is what forced imports inside functions (`runner` and `parallel` once imported each
other that way); it also means no module of it can be read, tested or replaced alone. The graph
is read from the source with `ast`: every `import` and `from ... import` anywhere in a module,
inside functions too (that is where cycles hide), except under `if TYPE_CHECKING:` (never run).
The rule catalogue (`rules/`, installed as `torchlint_inplace.rules`) is part of the package.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = ((REPO / "torchlint_inplace", "torchlint_inplace"), (REPO / "rules", "torchlint_inplace.rules"))


def _modules(folders: tuple[tuple[Path, str], ...]) -> dict[str, Path]:
    found = {}
    for folder, package in folders:
        for path in folder.rglob("*.py"):
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _type_checking_only(tree: ast.Module) -> set[ast.AST]:
    return {
        node
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING"
        for statement in block.body
        for node in ast.walk(statement)
    }


def _imported(name: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    skipped = _type_checking_only(tree)
    for node in ast.walk(tree):
        if node in skipped:
            continue
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            candidates = [module, *(f"{module}.{alias.name}" for alias in node.names)]
        else:
            continue
        yield from (candidate for candidate in candidates if candidate in modules and candidate != name)


@cache
def import_cycles(folders: tuple[tuple[Path, str], ...] = PACKAGE) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    modules = _modules(folders)
    graph = {name: sorted(set(_imported(name, path, modules))) for name, path in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_the_reader_sees_imports_inside_functions_and_skips_type_checking_ones(tmp_path: Path) -> None:
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "a.py").write_text("from . import b\n")
    (tmp_path / "b.py").write_text("def f():\n    from .a import g\n")
    (tmp_path / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import d\n")
    (tmp_path / "d.py").write_text("import pkg.c\n")
    assert import_cycles(((tmp_path, "pkg"),)) == [["pkg.a", "pkg.b"]]


def test_no_import_cycle_in_the_package() -> None:
    assert import_cycles() == []
