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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

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

    def record_syntactic_position(  # type: ignore[override]  # the same context manager, without a generator
        self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None, end_node: cst.CSTNode | None = None
    ) -> _Syntactic:
        return _Syntactic(self, node, start_node, end_node)


class _Syntactic:
    """The context manager `record_syntactic_position` returns, without a generator."""

    __slots__ = ("recorder", "node", "start_node", "end_node", "start")

    def __init__(
        self, recorder: _SpanRecorder, node: cst.CSTNode, start_node: cst.CSTNode | None, end_node: cst.CSTNode | None
    ) -> None:
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
    `ParentNodeProvider` gives it at ten times the cost) each node's parent.

    A module `reparse` built from an earlier version's statements gets them from that
    version's positions (`edited`): spans before the edit as they were, spans after it moved
    by the lines the edit added, and a codegen of the changed statements only."""

    _previous: Positions | None = None
    _depth = 0  # how many versions back the spans of kept statements come from
    _edit: Edit  # set by `edited`: the edit that made this version from `_previous`

    def __init__(self, module: cst.Module) -> None:
        recorder = _SpanRecorder(default_indent=module.default_indent, default_newline=module.default_newline)
        module._codegen(recorder)
        self._spans = recorder.spans
        self.parents: _Parents = _Parents(recorder.parents)

    @classmethod
    def edited(cls, module: cst.Module, previous: Positions, edit: Edit) -> Positions:
        """The positions of `module`, a new version of `previous`'s module: its nodes outside
        `edit.fresh` are nodes of that module, at the same lines before `edit.first_line` and
        `edit.shift` lines further from `edit.moved_from` (a line of the old version) on."""
        if previous._depth >= MAX_DERIVED:
            return cls(module)  # a long chain of versions: start afresh
        self = cls.__new__(cls)
        recorder = _SpanRecorder(default_indent=module.default_indent, default_newline=module.default_newline)
        recorder.line = edit.first_line
        for node in edit.fresh:
            node._codegen(recorder)
        recorder.spans[module] = ((1, 0), edit.end)
        top: dict[cst.CSTNode, cst.CSTNode] = {node: module for node in (*module.header, *module.body, *module.footer)}
        self._spans, self._previous, self._depth, self._edit = recorder.spans, previous, previous._depth + 1, edit
        self.parents = _Parents({**recorder.parents, **top}, previous.parents)
        return self

    def _point(self, node: cst.CSTNode) -> tuple[_Point, _Point]:
        known = self._spans.get(node)
        if known is not None or self._previous is None:
            if known is None:
                raise KeyError(node)
            return known
        (start_line, start_column), (end_line, end_column) = self._previous._point(node)
        if start_line < self._edit.first_line:
            return (start_line, start_column), (end_line, end_column)
        if start_line >= self._edit.moved_from:
            shift = self._edit.shift
            return (start_line + shift, start_column), (end_line + shift, end_column)
        raise KeyError(node)  # a node of the old version that the edit replaced

    def __getitem__(self, node: cst.CSTNode) -> Span:
        (start_line, start_column), (end_line, end_column) = self._point(node)
        return Span(Position(start_line, start_column), Position(end_line, end_column))


# Versions whose kept spans are looked up through earlier ones, at most; then a full codegen.
MAX_DERIVED = 8


@dataclass(frozen=True)
class Edit:
    """What changed between two versions of a module, as their positions need it."""

    fresh: tuple[cst.CSTNode, ...]  # the new version's top-level nodes not in the old, in order
    first_line: int  # where the first of them starts (the lines above are the old version's)
    moved_from: int  # the old version's line from which its kept nodes continue
    shift: int  # lines added (or, negative, removed) above those
    end: _Point  # where the new version's code ends


class _Parents:
    """Each node's parent: this version's own, else those of the version it was built from."""

    def __init__(self, own: dict[cst.CSTNode, cst.CSTNode], previous: _Parents | None = None) -> None:
        self._own, self._previous = own, previous

    def get(self, node: cst.CSTNode) -> cst.CSTNode | None:
        parent = self._own.get(node)
        if parent is None and self._previous is not None:
            return self._previous.get(node)
        return parent


class _LastModuleCache(Generic[T]):
    """`build(module)`, kept for the module last asked about: the analysis' messages, then the
    fixer's edits, ask about one file after another, and no more than one file's worth is kept."""

    def __init__(self, build: Callable[[cst.Module], T]) -> None:
        self._build = build
        self._last: tuple[cst.Module, T] | None = None

    def __call__(self, module: cst.Module) -> T:
        if self._last is None or self._last[0] is not module:
            self._last = (module, self._build(module))
        return self._last[1]

    def peek(self, module: cst.Module) -> T | None:
        """What is kept for `module`, without building it."""
        return self._last[1] if self._last is not None and self._last[0] is module else None


def last_module_cache(build: Callable[[cst.Module], T]) -> _LastModuleCache[T]:
    return _LastModuleCache(build)


# The module `reparse` built last, whose positions can come from its previous version's.
_derived: tuple[cst.Module, Positions, Edit] | None = None


def derive(module: cst.Module, previous: cst.Module, edit: Edit) -> None:
    """`module` is a new version of `previous`: if `previous`'s positions are at hand now (the
    editor's last version was reported on), `module`'s are derived from them when asked for."""
    global _derived
    known = positions_of.peek(previous)
    _derived = (module, known, edit) if known is not None else None


def _positions(module: cst.Module) -> Positions:
    global _derived
    if _derived is not None and _derived[0] is module:
        _, previous, edit = _derived
        _derived = None
        return Positions.edited(module, previous, edit)
    return Positions(module)


def line_of(text: str, offset: int) -> int:
    """The 1-based line of `text` that offset `offset` lies on, counting line breaks as LibCST does."""
    return 1 + len(_NEWLINE.findall(text, 0, offset))


positions_of = last_module_cache(_positions)
