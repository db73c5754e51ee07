"""The shared analysis: one pass per file that every rule reads.

One traversal collects imports, classes and functions; each function body is then run
through the abstract interpreter, which reports every in-place write it can explain.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from ..diagnostics import Position, Span
from .classes import ClassInfo, ClassReader
from .imports import Imports
from .interpreter import FileContext, FunctionInterpreter
from .model import FileAnalysis, Form, Mutation
from .params import function_grad_enabled, tensor_parameters
from .torch_facts import torch_facts


@dataclass
class _Function:
    node: cst.FunctionDef
    cls: cst.ClassDef | None


class _Collector(cst.CSTVisitor):
    """Imports, classes and functions, in one walk."""

    def __init__(self, imports: Imports) -> None:
        self.imports = imports
        self.classes: list[cst.ClassDef] = []
        self.functions: list[_Function] = []
        self.top_level: list[cst.BaseStatement] = []
        self._class_stack: list[cst.ClassDef | None] = []

    def visit_Import(self, node: cst.Import) -> None:
        self.imports.add(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self.imports.add(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.classes.append(node)
        self._class_stack.append(node)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._class_stack.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.append(_Function(node, self._class_stack[-1] if self._class_stack else None))
        self._class_stack.append(None)  # a class body ends where a def begins

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._class_stack.pop()

    # Expressions hold no imports, classes or defs worth the walk (lambdas are not analysed).
    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
        return any(isinstance(small, (cst.Import, cst.ImportFrom)) for small in node.body)


class _Positions:
    """Line and column of nodes, computed for the whole module only when first asked."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self._positions = None

    def span_of(self, node: cst.CSTNode) -> Span:
        if self._positions is None:
            self._positions = MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)
        code_range = self._positions[node]
        return Span(Position(code_range.start.line, code_range.start.column), Position(code_range.end.line, code_range.end.column))


def analyze(module: cst.Module, path: str) -> FileAnalysis:
    imports = Imports()
    collector = _Collector(imports)
    module.visit(collector)
    positions = _Positions(module)
    ctx = FileContext(path, imports, torch_facts(), positions.span_of, module.code_for_node)
    reader = ClassReader(imports, positions.span_of)
    classes: dict[int, ClassInfo] = {id(node): reader.read(node) for node in collector.classes}

    sink: dict[tuple[int, Form], Mutation] = {}
    for function in collector.functions:
        cls = classes.get(id(function.cls)) if function.cls is not None else None
        interpreter = FunctionInterpreter(ctx, cls, sink)
        interpreter.run_function(
            function.node,
            tensor_parameters(function.node, cls),
            function_grad_enabled(function.node, cls, imports),
        )
    top_level = [statement for statement in module.body if not isinstance(statement, (cst.FunctionDef, cst.ClassDef))]
    FunctionInterpreter(ctx, None, sink).run_statements(top_level)
    mutations = sorted(sink.values(), key=lambda mutation: (mutation.span, mutation.form.value))
    return FileAnalysis(path=path, module=module, mutations=mutations)


__all__ = ["FileAnalysis", "Form", "Mutation", "analyze"]
