"""The project around a file: its classes and functions, and other project files on demand.

A call site needs its callee's summary; the callee may live in another file of the same
package (`from .layers import Clip`, `from mypkg.layers import Clip`). Files are parsed when a
call first needs them and kept for the rest of the run; nothing is imported or executed.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from ..diagnostics import Position, Span
from .classes import ClassInfo, ClassReader
from .imports import Imports
from .summaries import EMPTY, Summary
from .torch_facts import TorchFacts, torch_facts

MAX_PROJECT_FILE_BYTES = 2_000_000
MAX_IMPORTER_SCAN = 500
MAX_CACHED_FILES = 64


@dataclass
class FileContext:
    path: str
    module: cst.Module
    imports: Imports
    facts: TorchFacts
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    class_nodes: dict[int, ClassInfo] = field(default_factory=dict)  # id(ClassDef) -> info
    functions: dict[str, cst.FunctionDef] = field(default_factory=dict)  # module level
    bodies: list[tuple[cst.FunctionDef, ClassInfo | None]] = field(default_factory=list)
    _positions: object = None

    def span_of(self, node: cst.CSTNode) -> Span:
        """Positions are computed for the whole module, once, when a finding first needs one."""
        if self._positions is None:
            self._positions = MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)
        code_range = self._positions[node]
        return Span(Position(code_range.start.line, code_range.start.column), Position(code_range.end.line, code_range.end.column))

    def code_of(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)


class _Collector(cst.CSTVisitor):
    """Imports, classes and functions, in one walk."""

    def __init__(self, imports: Imports) -> None:
        self.imports = imports
        self.classes: list[cst.ClassDef] = []
        self.functions: list[tuple[cst.FunctionDef, cst.ClassDef | None]] = []
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
        self.functions.append((node, self._class_stack[-1] if self._class_stack else None))
        self._class_stack.append(None)  # a class body ends where a def begins

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._class_stack.pop()

    # Expressions hold no imports, classes or defs worth the walk (lambdas are not analysed).
    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
        return any(isinstance(small, (cst.Import, cst.ImportFrom)) for small in node.body)


def index_module(path: str, module: cst.Module) -> FileContext:
    imports = Imports()
    collector = _Collector(imports)
    module.visit(collector)
    ctx = FileContext(path, module, imports, torch_facts())
    ctx.functions = {node.name.value: node for node, owner in collector.functions if owner is None and node in module.body}
    reader = ClassReader(imports, ctx.functions)
    for node in collector.classes:
        info = reader.read(node)
        ctx.class_nodes[id(node)] = info
        ctx.classes.setdefault(info.name, info)
    for info in ctx.class_nodes.values():
        for base in info.bases:
            parent = ctx.classes.get(base)
            if parent is not None and parent is not info:
                info.inherit(parent)
    ctx.bodies = [(node, ctx.class_nodes.get(id(owner)) if owner is not None else None) for node, owner in collector.functions]
    return ctx


class Project:
    """Files of one run, indexed once each, and the summaries computed from them."""

    def __init__(self) -> None:
        # Most recently used last; bounded so that a large tree never keeps every syntax tree alive.
        self._files: OrderedDict[str, FileContext | None] = OrderedDict()
        self._summaries: dict[tuple[str, int], Summary] = {}
        self._argument_writers: set[str] = set()
        # What the analysis of the current file read besides the file itself: the results cache
        # must be invalidated when any of these change.
        self.dependencies: set[str] = set()
        self.scanned_roots: set[str] = set()

    def add(self, ctx: FileContext) -> None:
        self._remember(key_of(ctx.path), ctx)

    def file(self, path: Path) -> FileContext | None:
        key = key_of(path)
        self.dependencies.add(key)
        if key in self._files:
            self._files.move_to_end(key)
            return self._files[key]
        return self._remember(key, _read_index(path))

    def _remember(self, key: str, ctx: FileContext | None) -> FileContext | None:
        self._files[key] = ctx
        self._files.move_to_end(key)
        while len(self._files) > MAX_CACHED_FILES:
            evicted, _ = self._files.popitem(last=False)
            for summary_key in [k for k in self._summaries if k[0] == evicted]:
                del self._summaries[summary_key]
        return ctx

    def mark_argument_writer(self, ctx: FileContext) -> None:
        """A function in `ctx` writes into one of its own tensor arguments."""
        self._argument_writers.add(key_of(ctx.path))

    def writes_arguments(self, ctx: FileContext) -> bool:
        return key_of(ctx.path) in self._argument_writers

    def importers(self, ctx: FileContext) -> list[FileContext]:
        """Files of the same package that import `ctx`'s module: the callers that may pass it tensors."""
        here = Path(ctx.path)
        root = here.parent
        while (root / "__init__.py").exists() and (root.parent / "__init__.py").exists():
            root = root.parent
        self.scanned_roots.add(key_of(root))
        found = []
        for candidate in sorted(root.rglob("*.py"))[:MAX_IMPORTER_SCAN]:
            if key_of(candidate) == key_of(here):
                continue
            try:
                if here.stem not in candidate.read_text("utf-8", errors="replace"):
                    continue
            except OSError:
                continue
            other = self.file(candidate)
            if other is not None and any(_imported_file(other, local) and key_of(_imported_file(other, local)[0]) == key_of(here) for local in (*other.imports.relative, *other.imports.aliases)):
                found.append(other)
        return found

    def resolve_class(self, ctx: FileContext, name: str) -> tuple[FileContext, ClassInfo] | None:
        found = self._resolve(ctx, name, lambda other, short: other.classes.get(short))
        return found

    def resolve_function(self, ctx: FileContext, name: str) -> tuple[FileContext, cst.FunctionDef] | None:
        return self._resolve(ctx, name, lambda other, short: other.functions.get(short))

    def _resolve(self, ctx: FileContext, name: str, lookup):
        local = lookup(ctx, name)
        if local is not None:
            return ctx, local
        head, _, rest = name.partition(".")
        target = _imported_file(ctx, head)
        if target is None:
            return None
        module_path, imported = target
        other = self.file(module_path)
        if other is None:
            return None
        short = rest or imported
        found = lookup(other, short)
        return (other, found) if found is not None else None

    def summary(self, ctx: FileContext, func: cst.FunctionDef, cls: ClassInfo | None) -> Summary:
        key = (key_of(ctx.path), id(func))
        if key not in self._summaries:
            self._summaries[key] = EMPTY  # recursion guard: a function calling itself learns nothing
            from .interpreter import summarize

            self._summaries[key] = summarize(self, ctx, func, cls)
        return self._summaries[key]


def key_of(path: str | Path) -> str:
    return os.path.normpath(os.path.abspath(path))


def _read_index(path: Path) -> FileContext | None:
    try:
        if path.stat().st_size > MAX_PROJECT_FILE_BYTES:
            return None
        module = cst.parse_module(path.read_bytes())
    except (OSError, cst.ParserSyntaxError, UnicodeDecodeError, RecursionError, ValueError):
        return None
    return index_module(str(path), module)


def _imported_file(ctx: FileContext, local: str) -> tuple[Path, str] | None:
    """The project file a name was imported from, and its name there."""
    here = Path(ctx.path).parent
    if local in ctx.imports.relative:
        level, module, name = ctx.imports.relative[local]
        base = here
        for _ in range(level - 1):
            base = base.parent
        return _module_file(base, module, name)
    qualname = ctx.imports.aliases.get(local)
    if qualname is None or qualname.startswith("torch"):
        return None
    root = here
    while (root / "__init__.py").exists():
        root = root.parent
    module, _, name = qualname.rpartition(".")
    return _module_file(root, module, name) if module else None


def _module_file(base: Path, module: str, name: str) -> tuple[Path, str] | None:
    folder = base.joinpath(*module.split(".")) if module else base
    for candidate in (folder.with_suffix(".py"), folder / "__init__.py"):
        if module and candidate.is_file():
            return candidate, name
    if not module:
        candidate = folder / f"{name}.py"  # `from . import layers` then `layers.Clip`
        if candidate.is_file():
            return candidate, ""
    return None
