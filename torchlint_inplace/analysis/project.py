"""The project around a file: its classes and functions, and other project files on demand.

A call site needs its callee's summary; the callee may live in another file of the same
package (`from .layers import Clip`, `from mypkg.layers import Clip`). Files are parsed when a
call first needs them and kept for the rest of the run; nothing is imported or executed.
"""

from __future__ import annotations

import os
import re
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from .. import source
from ..diagnostics import Span
from .classes import ClassInfo, ClassReader
from .imports import Imports
from .positions import Positions, positions_of
from .summaries import EMPTY, Summary
from .torch_facts import TorchFacts, torch_facts

# Files read for context (callees, callers) are skipped above this size: their trees cost
# hundreds of MB, and torch's 1.4 MB test table was read as a "caller" of files it merely
# imports (5 s and 750 MB each time). Such a file is still checked when it is itself linted.
MAX_PROJECT_FILE_BYTES = 500_000
MAX_IMPORTER_SCAN = 5000
_IMPORT_LINE = re.compile(r"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+import[^\n#]*|import[ \t]+[^\n#]+)", re.MULTILINE)
# A syntax tree costs LibCST 100-600 bytes per character of source (torch's largest file, 1.4 MB
# of literal tables, is 785 MB of tree), so the trees kept are bounded by the size of their
# sources. On timm, 1 M characters keeps the peak at ~150 MB and re-parses 15 callees (0.4 M:
# 130 MB, 43 re-parsed; unbounded: 38 callees parsed once, 176+ MB).
MAX_CACHED_SOURCE = 1_000_000


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
    text_hash: int | None = None  # of the decoded text `module` was parsed from, when read from disk
    size: int = 0  # characters of that text: what the tree costs in memory (0: not known)
    _positions: Positions | None = None

    def span_of(self, node: cst.CSTNode) -> Span:
        """Positions are computed for the whole module, once, when a finding first needs one."""
        if self._positions is None:
            self._positions = positions_of(self.module)
        return self._positions[node]

    def code_of(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)


def statements(body: Sequence[cst.CSTNode], owner: cst.ClassDef | None = None) -> Iterator[tuple[cst.CSTNode, cst.ClassDef | None]]:
    """Every statement in source order, nested blocks included, with the class whose body holds it.

    A hand-written walk over statement bodies only: imports, classes and defs never live inside
    expressions (lambdas are not analysed), and LibCST's own visitor rebuilds every node it
    passes, which costs more than the parse.
    """
    for node in body:
        yield node, owner
        for block, block_owner in _blocks(node):
            yield from statements(block, block_owner)


def _blocks(node: cst.CSTNode) -> list[tuple[Sequence[cst.CSTNode], cst.ClassDef | None]]:
    if isinstance(node, cst.ClassDef):
        return [(_body(node.body), node)]
    blocks = []
    for attribute in ("body", "orelse", "finalbody"):
        block = getattr(node, attribute, None)
        if isinstance(block, cst.If):
            blocks.append(([block], None))
        elif isinstance(block, (cst.BaseSuite, cst.Else, cst.Finally)):
            blocks.append((_body(block if isinstance(block, cst.BaseSuite) else block.body), None))
    for part in (*getattr(node, "handlers", ()), *getattr(node, "cases", ())):
        blocks.append((_body(part.body), None))
    return blocks


def _body(suite: cst.BaseSuite) -> Sequence[cst.CSTNode]:
    return suite.body if isinstance(suite, cst.IndentedBlock) else (cst.SimpleStatementLine(suite.body),)


def index_module(path: str, module: cst.Module) -> FileContext:
    imports = Imports()
    classes: list[cst.ClassDef] = []
    functions: list[tuple[cst.FunctionDef, cst.ClassDef | None]] = []
    for node, owner in statements(module.body):
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)):
                    imports.add(small)
        elif isinstance(node, cst.ClassDef):
            classes.append(node)
        elif isinstance(node, cst.FunctionDef):
            functions.append((node, owner))
    ctx = FileContext(path, module, imports, torch_facts())
    top_level = set(map(id, module.body))
    ctx.functions = {node.name.value: node for node, owner in functions if owner is None and id(node) in top_level}
    reader = ClassReader(imports, ctx.functions)
    for node in classes:
        info = reader.read(node)
        ctx.class_nodes[id(node)] = info
        ctx.classes.setdefault(info.name, info)
    for info in ctx.class_nodes.values():
        for base in info.bases:
            parent = ctx.classes.get(base)
            if parent is not None and parent is not info:
                info.inherit(parent)
    ctx.bodies = [(node, ctx.class_nodes.get(id(owner)) if owner is not None else None) for node, owner in functions]
    return ctx


class Project:
    """Files of one run, indexed once each, and the summaries computed from them."""

    def __init__(self) -> None:
        # Most recently used last; bounded so that a large tree never keeps every syntax tree alive.
        self._files: OrderedDict[str, FileContext | None] = OrderedDict()
        self._size = 0  # of the sources of the files kept
        self._checking: str | None = None  # the file `context` was last asked for
        self._summaries: dict[tuple[str, int], Summary] = {}
        self._argument_writers: set[str] = set()
        self._import_indexes: dict[str, dict[str, list[Path]]] = {}
        # What the analysis of the current file read besides the file itself: the results cache
        # must be invalidated when any of these change.
        self.dependencies: set[str] = set()
        self.scanned_roots: set[str] = set()

    def parse(self, path: str, text: str) -> cst.Module:
        """The syntax tree of `text`, read from `path`: the one parsed already when `path` was
        read as a callee with the same text. Raises `libcst.ParserSyntaxError`."""
        key = key_of(path)
        known = self._files.get(key)
        if known is not None and known.text_hash == hash(text):
            self._files.move_to_end(key)
            return known.module
        ctx = _indexed(path, text, cst.parse_module(text))
        self._remember(key, ctx)
        return ctx.module

    def context(self, path: str, module: cst.Module) -> FileContext:
        """The indexed file for `module`: the one `parse` made, or read as a callee, when it is that same tree."""
        self._checking = key = key_of(path)
        known = self._files.get(key)
        if known is not None and known.module is module:
            return known
        ctx = index_module(path, module)
        self._remember(key, ctx)
        return ctx

    def file(self, path: Path) -> FileContext | None:
        key = key_of(path)
        self.dependencies.add(key)
        if key in self._files:
            self._files.move_to_end(key)
            return self._files[key]
        return self._remember(key, _read_index(path))

    def _remember(self, key: str, ctx: FileContext | None) -> FileContext | None:
        self._forget(key)
        self._files[key] = ctx
        self._size += ctx.size if ctx is not None else 0
        # The file being checked stays: its findings' nodes must be the nodes of its one tree.
        evictable = (other for other in list(self._files) if other not in (key, self._checking))
        while self._size > MAX_CACHED_SOURCE and (oldest := next(evictable, None)) is not None:
            self._forget(oldest)
        return ctx

    def _forget(self, key: str) -> None:
        if key not in self._files:
            return
        ctx = self._files.pop(key)
        self._size -= ctx.size if ctx is not None else 0
        for summary_key in [k for k in self._summaries if k[0] == key]:
            del self._summaries[summary_key]

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
        for candidate in self._import_index(root).get(here.stem, ()):
            if key_of(candidate) == key_of(here):
                continue
            other = self.file(candidate)
            if other is not None and any(_imports_file(other, local, here) for local in (*other.imports.relative, *other.imports.aliases)):
                found.append(other)
        return found

    def _import_index(self, root: Path) -> dict[str, list[Path]]:
        """For a package root, once per run: which files mention which module names in imports."""
        key = key_of(root)
        if key not in self._import_indexes:
            index: dict[str, list[Path]] = {}
            for candidate in sorted(root.rglob("*.py"))[:MAX_IMPORTER_SCAN]:
                try:
                    text = candidate.read_text("utf-8", errors="replace")
                except OSError:
                    continue
                for name in {word for match in _IMPORT_LINE.finditer(text) for word in re.findall(r"\w+", match.group(0))}:
                    index.setdefault(name, []).append(candidate)
            self._import_indexes[key] = index
        return self._import_indexes[key]

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
        text = source.read(path).text
        return _indexed(str(path), text, cst.parse_module(text))
    except (OSError, source.NotReadable, cst.ParserSyntaxError, RecursionError, ValueError):
        return None


def _indexed(path: str, text: str, module: cst.Module) -> FileContext:
    ctx = index_module(path, module)
    ctx.text_hash, ctx.size = hash(text), len(text)
    return ctx


def _imports_file(ctx: FileContext, local: str, target: Path) -> bool:
    found = _imported_file(ctx, local)
    return found is not None and key_of(found[0]) == key_of(target)


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
