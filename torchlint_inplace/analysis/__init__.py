"""The shared analysis: one pass per file that every rule reads.

The file is indexed once (imports, classes, functions, module-level names); its entry points
(top-level code, the `forward` of classes nobody in the file builds, functions nothing calls)
are run through the abstract interpreter, which follows calls into the file's classes and
functions and into other project files, and reports every in-place write it can explain. When
a write in the file depends on what callers pass (a function writing its argument, a factory
building an in-place module), the files that import it are read as callers too.
"""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from ..recursion import deep_recursion
from .engine import Engine
from .model import FileAnalysis, Form, Mutation
from .project import FileContext, Project, key_of


def analyze(module: cst.Module, path: str, project: Project | None = None, preview: bool = False) -> FileAnalysis:
    project = project or Project()
    ctx = project.context(path, module)
    project.dependencies, project.scanned_roots = set(), set()
    engine = Engine(project)
    # The interpreter recurses once per link of an expression chain (`x + x + ...`, `x.a.b...`).
    with deep_recursion():
        found = engine.analyze(ctx)
        if engine.needs_callers(ctx):
            for caller, names in project.importers(ctx):
                found.extend(Engine(project).analyze(caller, names))
    mutations = _one_per_write(mutation for mutation in found if key_of(mutation.path) == key_of(path))
    dependencies = frozenset(project.dependencies - {key_of(path)})
    return FileAnalysis(path, module, mutations, preview, dependencies, frozenset(project.scanned_roots))


def _one_per_write(mutations: Iterable[Mutation]) -> list[Mutation]:
    """One finding per write: a proven one over one only suspected, an unconditional one over a
    conditional one, an error over silent damage, else the first met."""
    chosen: dict[tuple[int, Form], Mutation] = {}
    for mutation in mutations:
        key = (id(mutation.node), mutation.form)
        known = chosen.get(key)
        if known is None or _rank(mutation) < _rank(known):
            chosen[key] = mutation
    return list(chosen.values())


def _rank(mutation: Mutation) -> tuple[bool, bool, bool, int]:
    return (not mutation.certain, mutation.conditional, mutation.silent, len(mutation.condition))


__all__ = ["FileAnalysis", "FileContext", "Form", "Mutation", "Project", "analyze"]
