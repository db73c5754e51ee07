"""The shared analysis: one pass per file that every rule reads.

One traversal indexes imports, classes and functions; each function body (and the module's
top level, where training loops live) is then run through the abstract interpreter, which
reports every in-place write it can explain. Calls into other project files are resolved
through a `Project` shared by the whole run.
"""

from __future__ import annotations

import libcst as cst

from ..recursion import deep_recursion
from .interpreter import FunctionInterpreter
from .model import FileAnalysis, Form, Mutation
from .project import FileContext, Project, key_of


def analyze(module: cst.Module, path: str, project: Project | None = None, preview: bool = False) -> FileAnalysis:
    project = project or Project()
    ctx = project.context(path, module)
    project.dependencies, project.scanned_roots = set(), set()
    sink: dict[tuple, Mutation] = {}
    _interpret(project, ctx, sink, report=ctx)
    if project.writes_arguments(ctx):
        # Whether writing an argument hurts depends on the callers: read the files that import this one.
        for caller in project.importers(ctx):
            _interpret(project, caller, sink, report=ctx)
    dependencies = frozenset(project.dependencies - {key_of(path)})
    # In the order the interpreter met them: sorting by position would make every one pay for it.
    return FileAnalysis(path, module, list(sink.values()), preview, dependencies, frozenset(project.scanned_roots))


def _interpret(project: Project, ctx: FileContext, sink: dict[tuple, Mutation], report: FileContext) -> None:
    top_level = [statement for statement in ctx.module.body if not isinstance(statement, (cst.FunctionDef, cst.ClassDef))]
    runs = [(lambda func=func, cls=cls: FunctionInterpreter(project, ctx, cls, sink, report=report).run_function(func)) for func, cls in ctx.bodies]
    runs.append(lambda: FunctionInterpreter(project, ctx, None, sink, report=report).run_statements(top_level))
    # The interpreter recurses once per link of an expression chain (`x + x + ...`, `x.a.b...`).
    with deep_recursion():
        for run in runs:
            try:
                run()
            except RecursionError:
                continue  # pathologically deep expressions: this body yields no findings


__all__ = ["FileAnalysis", "Form", "Mutation", "Project", "analyze"]
