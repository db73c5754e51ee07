"""Which classes and functions can run a finding's line, found by reading the file.

The drivers of a line are the top-level class or function that holds it (`owners`) and, when
that does not prove it, the classes that mention what holds it (`callers`), in the same file or
elsewhere in its package: the caller whose tensor a TIP005/TIP007 callee mutates is where the
hazard shows. Only the file itself is imported here (`import_file`, as part of its package when
it sits in one); a caller's module is imported when its driver is loaded. No torch needed.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import os
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from ..layout import package_root

MAX_CALLERS = 8


def import_file(path: Path) -> ModuleType:
    """Imports `path`, as part of its package when it sits in one (relative imports work)."""
    root = package_root(path)
    if root is None:
        sys.path.insert(0, str(path.parent))
        spec = importlib.util.spec_from_file_location("__confirmed__", path)
        if spec is None or spec.loader is None:  # a `.py` path always has a source loader
            raise ImportError(f"cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    sys.path.insert(0, str(root.parent))
    return importlib.import_module(_dotted(Path(os.path.abspath(path)), root.parent))


def _dotted(path: Path, base: Path) -> str:
    return ".".join(path.relative_to(base).with_suffix("").parts).removesuffix(".__init__")


@dataclass
class Driver:
    """A class or function to run, and the finding lines it answers for even when it does not
    reach them (its own; none for a caller)."""

    load: Callable[[], object]  # returns the class or function (importing its module first)
    name: str
    owned: list[int]


def class_spans(tree: ast.Module) -> list[ast.ClassDef]:
    return [node for node in tree.body if isinstance(node, ast.ClassDef)]


def _top_level(tree: ast.Module) -> list[ast.ClassDef | ast.FunctionDef]:
    return [node for node in tree.body if isinstance(node, (ast.ClassDef, ast.FunctionDef))]


def _inside(node: ast.stmt, line: int) -> bool:
    return node.lineno <= line <= (node.end_lineno or node.lineno)


def _names_of_lines(tree: ast.Module, lines: list[int]) -> set[str]:
    """What a caller has to mention to reach the lines: their top-level class or function."""
    return {
        node.name
        for node in tree.body
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and any(_inside(node, line) for line in lines)
    }


def _mentions(node: ast.ClassDef, names: set[str]) -> bool:
    return any(
        (isinstance(n, ast.Name) and n.id in names) or (isinstance(n, ast.Attribute) and n.attr in names)
        for n in ast.walk(node)
    )


def owners(tree: ast.Module, module: ModuleType, lines: list[int]) -> list[Driver]:
    """The top-level class or function holding each line."""
    drivers = []
    for node in _top_level(tree):
        inside = [line for line in lines if _inside(node, line)]
        if inside:
            drivers.append(Driver(functools.partial(_attribute, module, node.name), node.name, inside))
    return drivers


def callers(path: Path, tree: ast.Module, module: ModuleType, lines: list[int]) -> Iterator[Driver]:
    """Classes in the file, then in the rest of its package, that use what holds the lines."""
    names = _names_of_lines(tree, lines)
    if not names:
        return
    found = 0
    for node in class_spans(tree):
        if node.name not in names and _mentions(node, names):
            found += 1
            yield Driver(functools.partial(_attribute, module, node.name), node.name, [])
    root = package_root(path)
    if root is None:
        return
    word = re.compile(r"\b(" + "|".join(map(re.escape, sorted(names))) + r")\b")
    for other in sorted(root.rglob("*.py")):
        if other == path or found >= MAX_CALLERS:
            continue
        try:
            text = other.read_text(encoding="utf-8")
            if not word.search(text):
                continue
            other_tree = ast.parse(text)
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            continue
        dotted = _dotted(other, root.parent)
        for node in class_spans(other_tree):
            if found < MAX_CALLERS and _mentions(node, names):
                found += 1
                yield Driver(functools.partial(_imported_attribute, dotted, node.name), node.name, [])


def _attribute(module: ModuleType, name: str) -> object:
    return getattr(module, name, None)


def _imported_attribute(dotted: str, name: str) -> object:
    return _attribute(importlib.import_module(dotted), name)
