"""Where things are in one module, for turning a rewrite into text edits.

Fixes are text edits (`Edit(span, content)`), so that they can be cached, shown as diffs and
applied to the file as it is, with its own indentation and newlines. This index answers the
questions builders ask of the syntax tree: a node's span, its statement, the enclosing function
and class, the indentation of a block, and the name `torch` is imported under.
"""

from __future__ import annotations

from typing import TypeVar

import libcst as cst

from ..analysis.imports import Imports
from ..analysis.positions import last_module_cache, positions_of
from ..analysis.project import statements
from ..diagnostics import Edit, Position, Span

_Node = TypeVar("_Node", bound=cst.CSTNode)


class SourceIndex:
    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self._positions = positions_of(module)  # the analysis computed them for its messages
        self._parents = self._positions.parents
        self.imports = Imports()
        for line, _ in statements(module.body):  # imports are statements, never inside expressions
            for node in line.body if isinstance(line, cst.SimpleStatementLine) else ():
                if isinstance(node, (cst.Import, cst.ImportFrom)):
                    self.imports.add(node)
        # The local name of the `torch` module itself, if the file has one (`import torch as th`).
        self.torch = next((local for local, full in self.imports.aliases.items() if full == "torch"), None)

    def span(self, node: cst.CSTNode) -> Span:
        return self._positions[node]

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self._parents.get(node)

    def ancestor(self, node: cst.CSTNode, kind: type | tuple[type, ...]) -> cst.CSTNode | None:
        current = self.parent(node)
        while current is not None and not isinstance(current, kind):
            current = self.parent(current)
        return current

    def statement_of(self, expr: cst.CSTNode) -> cst.Expr | None:
        """The expression statement `expr` is the whole of (`x.add_(1)` on its own), else None."""
        parent = self.parent(expr)
        return parent if isinstance(parent, cst.Expr) and parent.value is expr else None

    def indentation(self, line: cst.SimpleStatementLine | cst.BaseCompoundStatement) -> str:
        """The whitespace a statement line starts with, rebuilt from the enclosing blocks."""
        parts = []
        block = self.parent(line)
        while isinstance(block, cst.IndentedBlock):
            parts.append(self.module.default_indent if block.indent is None else block.indent)
            block = self.ancestor(block, cst.IndentedBlock)
        return "".join(reversed(parts))

    def _own_line(self, small: cst.CSTNode) -> cst.SimpleStatementLine | None:
        """The statement line `small` is alone on, when that line sits in a block (not `if c: x`)."""
        line = self.parent(small)
        if (
            isinstance(line, cst.SimpleStatementLine)
            and len(line.body) == 1
            and isinstance(self.parent(line), (cst.IndentedBlock, cst.Module))
        ):
            return line
        return None

    def insert_before(self, statement: cst.CSTNode, text: str) -> Edit:
        """`text` as a statement right before `statement`: its own line at the same indentation,
        or `text; ` in front when `statement` shares its line."""
        line = statement if isinstance(statement, cst.BaseCompoundStatement) else self._own_line(statement)
        if line is None:
            at = self.span(statement).start
            return Edit(Span(at, at), f"{text}; ")
        at = Position(self.span(line).start.line, 0)
        return Edit(Span(at, at), f"{self.indentation(line)}{text}{self.module.default_newline}")

    def insert_after(self, small: cst.BaseSmallStatement, text: str) -> Edit:
        line = self._own_line(small)
        end = self.span(small).end
        if line is None or (end.line == self.span(self.module).end.line and not self.module.has_trailing_newline):
            return Edit(Span(end, end), f"; {text}")
        at = Position(end.line + 1, 0)
        return Edit(Span(at, at), f"{self.indentation(line)}{text}{self.module.default_newline}")

    def delete(self, small: cst.BaseSmallStatement) -> Edit | None:
        """Removes a statement alone on its line, or None when removing it would empty a block."""
        line = self._own_line(small)
        block = self.parent(line) if line is not None else None
        if line is None or not isinstance(block, cst.IndentedBlock) or len(block.body) < 2:
            return None
        span = self.span(small)
        return Edit(Span(Position(span.start.line, 0), Position(span.end.line + 1, 0)), "")

    def replace(self, node: cst.CSTNode, text: str) -> Edit:
        return Edit(self.span(node), text)


def descendants(node: cst.CSTNode, kind: type[_Node] | tuple[type[_Node], ...]) -> list[_Node]:
    """The nodes of type `kind` within `node`, in source order (what `libcst.matchers.findall`
    gives, without the 0.4 s its import adds to every run, warm ones included)."""
    found: list[_Node] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, kind):
            found.append(current)
        stack.extend(reversed(current.children))
    return found


index_of = last_module_cache(SourceIndex)


def rebindable(expr: cst.CSTNode) -> bool:
    """A name or attribute chain (`x`, `self.cache`): something `expr = ...` can rebind."""
    if isinstance(expr, cst.Name):
        return True
    return isinstance(expr, cst.Attribute) and rebindable(expr.value)


def written_expression(node: cst.CSTNode) -> cst.BaseExpression | None:
    """What an in-place write node writes into: `x` in `x.add_(1)`, `x[i] = v`, `x += 1`."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        return node.func.value
    if isinstance(node, cst.AugAssign):
        target = node.target
    elif isinstance(node, cst.Assign) and len(node.targets) == 1:
        target = node.targets[0].target
    else:
        return None
    return target.value if isinstance(target, cst.Subscript) else target
