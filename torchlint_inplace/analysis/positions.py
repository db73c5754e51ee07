"""Where each node of a module lies: LibCST's `PositionProvider`, at a third of its cost.

Positions are only needed for what is reported, but then for whole modules: LibCST computes
them by generating the module's code again while tracking line and column, and its provider
spends more than the parse itself on the objects it makes per node (a `CodePosition` pair, a
`CodeRange` and a generator-based context manager for each of ~100,000 nodes in a large file).
This generator keeps plain tuples and the same rules: a node's span is what it marks as its
syntactic extent (`record_syntactic_position`), else everything its code generation emitted.
tests/test_positions.py compares it with `PositionProvider` on every fixture and on real code.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import wraps
from typing import TypeVar

import libcst as cst
from libcst._nodes.internal import CodegenState

from ..diagnostics import Position, Span

T = TypeVar("T")
_NEWLINE = re.compile(r"\r\n?|\n")
_Point = tuple[int, int]


@dataclass
class _SpanRecorder(CodegenState):
    line: int = 1
    column: int = 0
    spans: dict[cst.CSTNode, tuple[_Point, _Point]] = field(default_factory=dict)
    parents: dict[cst.CSTNode, cst.CSTNode] = field(default_factory=dict)
    _starts: list[_Point] = field(default_factory=list)
    _open: list[cst.CSTNode] = field(default_factory=list)  # the nodes whose code is being generated

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)
        for token in self.indent_tokens:
            self._advance(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self._advance(value)

    def _advance(self, value: str) -> None:
        if "\n" not in value and "\r" not in value:
            self.column += len(value)
            return
        segments = _NEWLINE.split(value)
        self.line += len(segments) - 1
        self.column = len(segments[-1])

    def before_codegen(self, node: cst.CSTNode) -> None:
        self._starts.append((self.line, self.column))
        if self._open:
            self.parents[node] = self._open[-1]
        self._open.append(node)

    def after_codegen(self, node: cst.CSTNode) -> None:
        self._open.pop()
        start = self._starts.pop()
        if node not in self.spans:  # a syntactic span recorded inside wins
            self.spans[node] = (start, (self.line, self.column))

    def record_syntactic_position(self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None, end_node: cst.CSTNode | None = None) -> _Syntactic:
        return _Syntactic(self, node, start_node, end_node)


class _Syntactic:
    """The context manager `record_syntactic_position` returns, without a generator."""

    __slots__ = ("recorder", "node", "start_node", "end_node", "start")

    def __init__(self, recorder: _SpanRecorder, node: cst.CSTNode, start_node: cst.CSTNode | None, end_node: cst.CSTNode | None) -> None:
        self.recorder, self.node, self.start_node, self.end_node = recorder, node, start_node, end_node

    def __enter__(self) -> None:
        self.start = (self.recorder.line, self.recorder.column)

    def __exit__(self, *exc_info: object) -> None:
        recorder = self.recorder
        start = recorder.spans[self.start_node][0] if self.start_node is not None else self.start
        end = recorder.spans[self.end_node][1] if self.end_node is not None else (recorder.line, recorder.column)
        recorder.spans[self.node] = (start, end)


class Positions:
    """The span of every node of one module, and (from the same pass, as LibCST's
    `ParentNodeProvider` gives it at ten times the cost) each node's parent."""

    def __init__(self, module: cst.Module) -> None:
        recorder = _SpanRecorder(default_indent=module.default_indent, default_newline=module.default_newline)
        module._codegen(recorder)
        self._spans = recorder.spans
        self.parents: Mapping[cst.CSTNode, cst.CSTNode] = recorder.parents

    def __getitem__(self, node: cst.CSTNode) -> Span:
        (start_line, start_column), (end_line, end_column) = self._spans[node]
        return Span(Position(start_line, start_column), Position(end_line, end_column))


def last_module_cache(build: Callable[[cst.Module], T]) -> Callable[[cst.Module], T]:
    """`build(module)`, kept for the module last asked about: the analysis' messages, then the
    fixer's edits, ask about one file after another, and no more than one file's worth is kept."""
    last: tuple[cst.Module, T] | None = None

    @wraps(build)
    def cached(module: cst.Module) -> T:
        nonlocal last
        if last is None or last[0] is not module:
            last = (module, build(module))
        return last[1]

    return cached


positions_of = last_module_cache(Positions)
