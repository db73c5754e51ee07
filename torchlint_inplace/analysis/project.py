"""The project around a file: its classes, functions and module-level names, and other project
files on demand.

A call site needs its callee, which may live in another file of the same package (`from .layers
import Clip`, `from mypkg.layers import Clip`) or of a project of scripts (`from utils.ops import
scale_` next to `train.py`). Files are parsed when a call first needs them and kept, within a
memory bound, for the rest of the run; nothing is imported or executed.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar, cast

import libcst as cst

from .. import layout, source
from ..diagnostics import Span
from .classes import ClassInfo, FunctionRef
from .dataclass_init import dataclass_decorator, generated_init, nodes_of
from .imports import Imports, bound_name, dotted, is_torch
from .positions import Positions, positions_of
from .reparse import Parsed, reparse
from .syntax import Words, descendants, filled_names, words_of
from .torch_facts import TorchFacts, torch_facts

# Files read for context (callees, callers) are skipped above this size: their trees cost
# hundreds of MB, and torch's 1.4 MB test table was read as a "caller" of files it merely
# imports (5 s and 750 MB each time). Such a file is still checked when it is itself linted.
MAX_PROJECT_FILE_BYTES = 500_000
MAX_CALLER_FILES = 4
# How many files decorating with one registry's methods are read to fill it (the nearest first):
# a small project registers a handful of classes in each; mmdet registers hundreds in `MODELS`.
MAX_REGISTERING_FILES = 32
T = TypeVar("T")
_IMPORT_LINE = re.compile(r"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+import[^\n#]*|import[ \t]+[^\n#]+)", re.MULTILINE)
# A syntax tree costs LibCST 40-600 bytes per character of source (all of timm, 5.5 M characters,
# is 230 MB of trees; torch's largest file, 1.4 MB of literal tables, 785 MB), so the trees
# kept are bounded by the size of their sources. Forgetting a file also forgets the runs and
# instances learnt from it (`Project._forget`), which the next file that reaches it redoes in
# every context: that, not the parse, is what this bound costs. A memo entry is forgotten with
# every file it read or holds a class of (`Project.reading`, `engine._files_held`); before that,
# entries kept in other files' names held the evicted trees and the peak did not follow the
# bound. On timm, cold in one process (2026-12-06): 1 M / 2 M characters, 54 CPU s, 313 MB;
# 2 M / 4 M, 47 s, 391 MB; 3 M / 6 M, 43 s, 440 MB. transformers' whole `models/`, `-j 2`:
# 21:49 -> ~5:30 wall at 3 M / 6 M. (Keeping more first exposed a memo hit that did not say
# what it built: `Engine.note_built`.)
MAX_CACHED_SOURCE = 3_000_000
_BACKWARD_HOOK_CALL = re.compile(r"\.register_(?:full_)?backward_hook\(")
_METHOD_DECORATOR = re.compile(r"^[ \t]*@(\w+)\.\w+", re.MULTILINE)  # `@NECKS.register_module()`
# While one file is analysed, the files it reaches are its working set: evicting one that the
# analysis comes back to re-parses it, again and again (a transformers model reaches 38 files,
# 1.5 M characters, and parsed 345 times under a 1 M bound). The bound is applied between
# files; within one, only this larger one, so that a pathological reach cannot exhaust memory.
MAX_WORKING_SOURCE = 6_000_000


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
    # Module-level bindings other than defs, classes and imports: name -> the value expression
    # last assigned to it at top level (read lazily by functions of the file).
    assignments: dict[str, cst.BaseExpression] = field(default_factory=dict)
    # Names functions declare `global` (`global activations` in the method that resets the dict
    # its hooks fill): a function binding one binds the module's.
    declared_global: frozenset[str] = frozenset()
    # Module-level `Class.attribute = value` (`FeatureExtractor.handle_class = Handle` after
    # both classes): the class attribute every instance reads, over the class body's.
    class_assignments: dict[tuple[str, str], cst.BaseExpression] = field(default_factory=dict)
    # Module-level names the top level changes after binding them (`LAYERS.register_module(...)`
    # in a loop, `TABLE[key] = value`): their value is what the whole top level leaves.
    mutated: frozenset[str] = frozenset()
    # The module-level definitions decorated by a method of a module-level object
    # (`@NECKS.register_module()` on a class), by id of the definition: each decorator applied
    # as Python applies it at import, `NECKS.register_module()(PAFPN)`, with the object's name.
    registrations: dict[int, list[tuple[str, cst.SimpleStatementLine]]] = field(default_factory=dict)
    text_hash: int | None = None  # of the decoded text `module` was parsed from, when read from disk
    size: int = 0  # characters of that text: what the tree costs in memory (0: not known)
    _positions: Positions | None = None
    # The text and tree of a file linted through `Project.parse`, for its next version's `reparse`.
    parsed: Parsed | None = None
    # The code of nodes asked for already: messages name the same expressions again on every
    # run of a function (loops run twice, a method once per caller), and each is a codegen.
    _code: dict[cst.CSTNode, str] = field(default_factory=dict)
    # What each definition mentions (`words`): the file is read again as a caller of each file
    # it imports, and asked again which of its definitions can reach that file.
    _words: dict[cst.CSTNode, Words] = field(default_factory=dict)
    _filled: dict[cst.CSTNode, frozenset[str]] = field(default_factory=dict)  # names a function stores into
    _lambdas: dict[cst.Lambda, cst.FunctionDef] = field(default_factory=dict)
    _implicit_calls: dict[cst.BaseExpression, cst.Call] = field(default_factory=dict)
    _evaluated: dict[tuple[str, int], cst.BaseExpression | None] = field(default_factory=dict)
    _body_ids: set[int] | None = None  # ids of `bodies`' nodes (`current`)
    # Where each imported name resolves on disk: every call of a function asks again, and each
    # answer is a few `stat`s (the files do not move during a run; an edited file gets a new context).
    imported_files: dict[str, tuple[Path, str] | None] = field(default_factory=dict)
    # The methods another method of their class names (`engine._called_by_siblings`): the file
    # is analysed again as a caller of each file it imports, and each time read whole.
    called_by_siblings: set[int] | None = None
    # The nodes of the `__init__`s written for dataclasses (`dataclass_init`), which are not in
    # the tree, each to the decorator where what is found in them is shown.
    generated_at: dict[cst.CSTNode, cst.CSTNode] = field(default_factory=dict)
    # Each dataclass (by id of its node) with its dataclass bases of this file, furthest first.
    dataclass_chains: dict[int, list[ClassInfo]] = field(default_factory=dict)
    # Whether each module-level function (by id) only builds, as an entry point (`builders`).
    builders: dict[int, bool] = field(default_factory=dict)

    def span_of(self, node: cst.CSTNode) -> Span:
        """Positions are computed for the whole module, once, when a finding first needs one."""
        if self._positions is None:
            self._positions = positions_of(self.module)
        try:
            return self._positions[node]
        except KeyError:
            if node not in self.generated_at:
                raise
            return self._positions[self.generated_at[node]]

    def code_of(self, node: cst.CSTNode) -> str:
        code = self._code.get(node)
        if code is None:
            code = self._code[node] = self.module.code_for_node(node)
        return code

    def lambda_def(self, node: cst.Lambda) -> cst.FunctionDef:
        """A lambda as the function it is (`def <lambda>(params): return body`), made once so
        that its runs are remembered; its own nodes are shown at the lambda."""
        made = self._lambdas.get(node)
        if made is None:
            returned = cst.Return(node.body)
            line = cst.SimpleStatementLine([returned])
            block = cst.IndentedBlock([line])
            name = cst.Name("lambda_")
            made = self._lambdas[node] = cst.FunctionDef(name, node.params, block)
            for part in (made, name, block, line, returned):
                self.generated_at.setdefault(part, node)
        return made

    def implicit_call(self, expr: cst.BaseExpression) -> cst.Call:
        """The call Python makes without one written: a `@property` read (`self.norm1`) calls its
        getter. Made once per expression, so that its runs are remembered, and shown at it."""
        made = self._implicit_calls.get(expr)
        if made is None:
            made = self._implicit_calls[expr] = cst.Call(expr)
            self.generated_at.setdefault(made, expr)
        return made

    def current(self, ref: FunctionRef) -> FunctionRef:
        """`ref` with this tree's node: a function or class kept from a tree read before and
        forgotten since (a value a memo entry or a registry still holds) runs as the file reads
        now, so that every node its run records lies in a tree the project holds."""
        if self._body_ids is None:
            self._body_ids = {id(node) for node, _ in self.bodies}
        if id(ref.node) in self._body_ids:
            return ref
        found = self.body_like(ref.node, ref.cls)
        # not found: written for this tree (a dataclass's `__init__`, a lambda), nothing to map
        return FunctionRef(ref.path, *found) if found is not None else ref

    def body_like(
        self, node: cst.FunctionDef, cls: ClassInfo | None
    ) -> tuple[cst.FunctionDef, ClassInfo | None] | None:
        """This tree's function of `node`'s name, in the class of `cls`'s name."""
        owner = cls.name if cls is not None else None
        return next(
            (
                (body, info)
                for body, info in self.bodies
                if body.name.value == node.name.value and (info.name if info is not None else None) == owner
            ),
            None,
        )

    def evaluated(self, text: str, at: cst.CSTNode) -> cst.BaseExpression | None:
        """The expression an `eval("Encoder{}".format(kind))` call evaluates, parsed once per
        text and call, its nodes shown at the call (None: not an expression)."""
        key = (text, id(at))
        if key not in self._evaluated:
            try:
                parsed: cst.BaseExpression | None = cst.parse_expression(text)
            except (cst.ParserSyntaxError, RecursionError, ValueError):
                parsed = None
            for node in descendants(parsed) if parsed is not None else ():
                self.generated_at.setdefault(node, at)
            self._evaluated[key] = parsed
        return self._evaluated[key]

    def filled(self, node: cst.FunctionDef) -> frozenset[str]:
        found = self._filled.get(node)
        if found is None:
            found = self._filled[node] = filled_names(node.body)
        return found

    def words(self, node: cst.CSTNode) -> Words:
        found = self._words.get(node)
        if found is None:
            found = self._words[node] = words_of(node)
        return found

    def function_ref(self, node: cst.FunctionDef, cls: ClassInfo | None) -> FunctionRef:
        return FunctionRef(self.path, node, cls)


def statements(
    body: Sequence[cst.CSTNode], owner: cst.ClassDef | None = None
) -> Iterator[tuple[cst.CSTNode, cst.ClassDef | None]]:
    """Every statement in source order, nested blocks included, with the class whose body holds it.

    A hand-written walk over statement bodies only: imports, classes and defs never live inside
    expressions (lambdas are not analysed), and LibCST's own visitor rebuilds every node it
    passes, which costs more than the parse.
    """
    for node in body:
        yield node, owner
        for block, block_owner in _blocks(node):
            yield from statements(block, block_owner)


# Statement walks compare exact types: LibCST's classes are ABCs, whose `isinstance` runs in
# Python, and a parsed tree holds only the concrete classes.
_SUITES = frozenset({cst.IndentedBlock, cst.SimpleStatementSuite})


def _blocks(node: cst.CSTNode) -> list[tuple[Sequence[cst.CSTNode], cst.ClassDef | None]]:
    if type(node) is cst.SimpleStatementLine:
        return []
    if type(node) is cst.ClassDef:
        return [(_body(node.body), node)]
    blocks: list[tuple[Sequence[cst.CSTNode], cst.ClassDef | None]] = []
    for attribute in ("body", "orelse", "finalbody"):
        block = getattr(node, attribute, None)
        if type(block) is cst.If:
            blocks.append(([block], None))
        elif type(block) in _SUITES:
            blocks.append((_body(cast(cst.BaseSuite, block)), None))
        elif type(block) is cst.Else or type(block) is cst.Finally:
            blocks.append((_body(block.body), None))
    for part in (*getattr(node, "handlers", ()), *getattr(node, "cases", ())):
        blocks.append((_body(part.body), None))
    return blocks


# Bases that give a dataclass no fields: `Generic[T]`, `ABC`, `object`.
_FIELDLESS_BASES = frozenset({"object", "abc", "typing", "typing_extensions", "torch"})


def _add_dataclass_init(ctx: FileContext, info: ClassInfo) -> None:
    """A dataclass's generated `__init__`, as a method (`dataclass_init`): its bases of this
    file are indexed before it, as Python defines them."""
    decorator = dataclass_decorator(info.node, ctx.imports.qualname)
    if decorator is None or "__init__" in info.methods:
        return
    chain: list[ClassInfo] | None = []
    for arg in info.node.bases:
        head = arg.value.value if isinstance(arg.value, cst.Subscript) else arg.value
        name = dotted(head) if arg.keyword is None else None
        base = ctx.classes.get(name) if name is not None else None
        if base is not None and chain is not None:
            chain.extend(owner for owner in ctx.dataclass_chains.get(id(base.node), ()) if owner not in chain)
        elif base is None and (ctx.imports.qualname(head) or name or "").split(".")[0] not in _FIELDLESS_BASES:
            chain = None  # a base elsewhere may be a dataclass with fields that come first
    ctx.dataclass_chains[id(info.node)] = [*(chain or []), info]
    post_init = any("__post_init__" in owner.methods for owner in [*(chain or []), info])
    bases = [owner.node for owner in chain] if chain is not None else None
    try:
        init, info.fields = generated_init(info.node, decorator, bases, post_init, ctx.imports.qualname)
    except cst.CSTValidationError:
        return  # fields Python itself would refuse (a required one after a default): left unread
    info.methods["__init__"] = init
    for node in nodes_of(init):
        ctx.generated_at.setdefault(node, decorator)


def _body(suite: cst.BaseSuite) -> Sequence[cst.CSTNode]:
    if type(suite) is cst.IndentedBlock:
        return suite.body
    assert isinstance(suite, cst.SimpleStatementSuite)  # the only other suite
    return (cst.SimpleStatementLine(suite.body),)


def index_module(path: str, module: cst.Module) -> FileContext:
    imports = Imports()
    classes: list[tuple[cst.ClassDef, cst.ClassDef | None]] = []
    functions: list[tuple[cst.FunctionDef, cst.ClassDef | None]] = []
    declared: set[str] = set()  # names a function declares `global`
    assigned_in_functions: dict[str, cst.BaseExpression] = {}  # what such a name was first given
    for node, owner in statements(module.body):
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)):
                    imports.add(small)
                elif isinstance(small, cst.Global):
                    declared.update(item.name.value for item in small.names)
                elif isinstance(small, cst.Assign) and declared:
                    for target in small.targets:
                        if isinstance(target.target, cst.Name) and target.target.value in declared:
                            assigned_in_functions.setdefault(target.target.value, small.value)
        elif isinstance(node, cst.ClassDef):
            classes.append((node, owner))
        elif isinstance(node, cst.FunctionDef):
            functions.append((node, owner))
    ctx = FileContext(path, module, imports, torch_facts())
    top_level = set(map(id, module.body))
    ctx.functions = {node.name.value: node for node, owner in functions if owner is None and id(node) in top_level}
    for node, _ in classes:
        bases = tuple(
            imports.qualname(arg.value) or dotted(arg.value) or "" for arg in node.bases if arg.keyword is None
        )
        info = ClassInfo(node.name.value, bases, node, path)
        for statement in _body(node.body):
            if isinstance(statement, cst.FunctionDef):
                info.methods[statement.name.value] = statement
        ctx.class_nodes[id(node)] = info
        _add_dataclass_init(ctx, info)
        if id(node) in top_level or node.name.value not in ctx.classes:
            ctx.classes[info.name] = info
    ctx.bodies = [(node, ctx.class_nodes.get(id(owner)) if owner is not None else None) for node, owner in functions]
    for statement in _module_level(module.body):
        for small in statement.body:
            if isinstance(small, cst.Assign):
                for target in small.targets:
                    if isinstance(target.target, cst.Name):
                        ctx.assignments[target.target.value] = small.value
                    elif (
                        isinstance(target.target, cst.Attribute)
                        and isinstance(target.target.value, cst.Name)
                        and target.target.value.value in ctx.classes
                    ):
                        ctx.class_assignments[(target.target.value.value, target.target.attr.value)] = small.value
            elif isinstance(small, cst.AnnAssign) and small.value is not None and isinstance(small.target, cst.Name):
                ctx.assignments[small.target.value] = small.value
            elif isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
                for alias in small.names:
                    ctx.assignments.pop(bound_name(alias), None)  # imported again: the import holds
    for name, value in assigned_in_functions.items():
        ctx.assignments.setdefault(name, value)  # `global activations; activations = {}` in a method
    ctx.declared_global = frozenset(declared)
    _index_registrations(ctx)
    ctx.mutated = frozenset(_mutated_at_top_level(module.body)) | (_receivers(ctx) & ctx.assignments.keys())
    return ctx


def _receivers(ctx: FileContext) -> set[str]:
    """The names the file's decorators register into (`NECKS` of `@NECKS.register_module()`)."""
    return {receiver for applied in ctx.registrations.values() for receiver, _ in applied}


def _index_registrations(ctx: FileContext) -> None:
    """`@REGISTRY.register_module()` on a top-level class or function, as the call Python makes
    at import (innermost decorator first). Only an object of the project can be changed by it:
    decorators of torch and the standard library (`@torch.no_grad()`, `@functools.cache`) are
    not registrations. The calls are built once, shown at their decorator (`generated_at`)."""
    for node in ctx.module.body:
        if not isinstance(node, (cst.ClassDef, cst.FunctionDef)):
            continue
        applied: list[tuple[str, cst.SimpleStatementLine]] = []
        for decorator in reversed(node.decorators):
            receiver = _registry_of(ctx, decorator.decorator)
            if receiver is None:
                continue
            name = cst.Name(node.name.value)
            arg = cst.Arg(name)
            call = cst.Call(decorator.decorator, [arg])
            expr = cst.Expr(call)
            line = cst.SimpleStatementLine([expr])
            for part in (line, expr, call, arg, name):
                ctx.generated_at[part] = decorator.decorator
            applied.append((receiver, line))
        if applied:
            ctx.registrations[id(node)] = applied


def _registry_of(ctx: FileContext, decorator: cst.BaseExpression) -> str | None:
    """The module-level name a decorator is a method of (`NECKS` of `@NECKS.register_module()`),
    when that name is the project's own."""
    func = decorator.func if isinstance(decorator, cst.Call) else decorator
    if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
        return None
    receiver = func.value.value
    qualname = ctx.imports.aliases.get(receiver)
    if qualname is not None and (is_torch(qualname) or qualname.split(".")[0] in sys.stdlib_module_names):
        return None
    return receiver


def _mutated_at_top_level(body: Sequence[cst.CSTNode]) -> Iterator[str]:
    """The names whose objects the module's own top level changes: called for effect
    (`ACTIVATION_LAYERS.register_module(module=module)`) or stored into (`TABLE[key] = cls`),
    in loops and branches too, not in functions or classes."""
    for statement in _module_level(body, loops=True):
        for small in statement.body:
            if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                func = small.value.func
                if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
                    yield func.value.value
            elif isinstance(small, (cst.Assign, cst.AugAssign)):
                targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                for target in targets:
                    if isinstance(target, (cst.Subscript, cst.Attribute)) and isinstance(target.value, cst.Name):
                        yield target.value.value


def _module_level(body: Sequence[cst.CSTNode], loops: bool = False) -> Iterator[cst.SimpleStatementLine]:
    """The module's simple statements in source order, those under its `if`/`else`, `with` and
    `try` bodies too (`if args.model == "LSTM": model = model.RNNModel(...)` rebinds the imported
    `model`; the last binding in the file is the one its functions read), not those of `except`
    handlers (`except ImportError: amp = None` is the fallback, not the import's replacement).
    With `loops`, those of `for` and `while` loops too (a registry filled by a loop)."""
    for statement in body:
        if isinstance(statement, cst.SimpleStatementLine):
            yield statement
        elif isinstance(statement, cst.If) or (loops and isinstance(statement, (cst.For, cst.While))):
            yield from _module_level(_body(statement.body), loops)
            orelse = statement.orelse
            if isinstance(orelse, cst.If):
                yield from _module_level((orelse,), loops)
            elif orelse is not None:
                yield from _module_level(_body(orelse.body), loops)
        elif isinstance(statement, (cst.With, cst.Try)):
            yield from _module_level(_body(statement.body), loops)


class Project:
    """Files of one run, indexed once each, and what was learnt about them (runs, instances)."""

    def __init__(self) -> None:
        # Most recently used last; bounded so that a large tree never keeps every syntax tree alive.
        self._files: OrderedDict[str, FileContext | None] = OrderedDict()
        self._size = 0  # of the sources of the files kept
        self._checking: str | None = None  # the file `context` was last asked for
        self._import_indexes: dict[str, _ImportIndex] = {}
        self._hooking_roots: set[str] = set()  # package roots where a file puts a module backward hook
        # Memoised results keyed by what they were computed from; each entry names the files it
        # read, so that forgetting a file forgets what was learnt from its tree.
        self.memo: dict[object, object] = {}
        self._memo_by_file: dict[str, set[object]] = {}  # file -> the memo keys that read it
        self._memo_files: dict[object, frozenset[str]] = {}  # memo key -> the files it read
        self._reads: list[set[str]] = []  # one per `reading` block under way, innermost last
        # What the analysis of the current file read besides the file itself: the results cache
        # must be invalidated when any of these change.
        self.dependencies: set[str] = set()
        self.scanned_roots: set[str] = set()
        self._registering: dict[tuple[str, str], tuple[Path, ...]] = {}

    def parse(self, path: str, text: str) -> cst.Module:
        """The syntax tree of `text`, read from `path`: the one parsed already when `path` was
        read as a callee with the same text, or one built from the tree of the text `path` held
        before (`reparse`: an editor's buffer, a round of fixes). Raises `libcst.ParserSyntaxError`."""
        key = key_of(path)
        known = self._files.get(key)
        if known is not None and known.text_hash == hash(text):
            self._files.move_to_end(key)
            return known.module
        previous = known.parsed if known is not None else None
        parsed = reparse(previous, text) if previous is not None else None
        if parsed is None:
            parsed = Parsed(text, cst.parse_module(text))
        ctx = _indexed(path, text, parsed.module)
        ctx.parsed = parsed
        self._remember(key, ctx)
        return ctx.module

    def context(self, path: str, module: cst.Module) -> FileContext:
        """The indexed file for `module`: the one `parse` made, or read as a callee, when it is that same tree."""
        self._checking = key = key_of(path)
        self._evict(MAX_CACHED_SOURCE, key)  # the last file's working set is no longer needed
        known = self._files.get(key)
        if known is not None and known.module is module:
            return known
        ctx = index_module(path, module)
        self._remember(key, ctx)
        return ctx

    def file(self, path: Path) -> FileContext | None:
        key = key_of(path)
        self.dependencies.add(key)
        if self._reads:
            self._reads[-1].add(key)
        if key in self._files:
            self._files.move_to_end(key)
            return self._files[key]
        return self._remember(key, _read_index(path))

    def contexts(self) -> list[FileContext]:
        return [ctx for ctx in self._files.values() if ctx is not None]

    @contextmanager
    def reading(self) -> Iterator[set[str]]:
        """The files the block reads, itself or through what it recalls: what it learns holds
        their nodes (a class built from another file keeps that file's `ClassDef`), so it must
        be forgotten with any of them, or evicting a file frees nothing. Nested blocks' reads
        count for the blocks around them."""
        self._reads.append(set())
        try:
            yield self._reads[-1]
        finally:
            read = self._reads.pop()
            if self._reads:
                self._reads[-1] |= read

    def recall(self, key: object) -> object | None:
        """What the memo holds under `key` (None: nothing); the files it read count as read,
        by the blocks under way and by the file being checked (whose cached findings must be
        invalidated by an edit to any of them, whichever file's analysis filled the memo)."""
        value = self.memo.get(key)
        if value is not None:
            files = self._memo_files[key]
            self.dependencies |= files
            if self._reads:
                self._reads[-1] |= files
        return value

    def learn(self, key: object, compute: Callable[[], T], files: Callable[[T], Iterable[str]]) -> T:
        """What the memo holds under `key`, else `compute()`, remembered with the files `files`
        names for its value and every file the computation read."""
        known = self.recall(key)
        if known is not None:
            return cast(T, known)
        with self.reading() as read:
            value = compute()
        self.remember(key, value, frozenset(files(value)) | read)
        return value

    def remember(self, key: object, value: object, files: frozenset[str]) -> None:
        self._unlearn(key)
        self.memo[key] = value
        self._memo_files[key] = files
        for file in files:
            self._memo_by_file.setdefault(file, set()).add(key)
        if self._reads:
            self._reads[-1] |= files

    def _remember(self, key: str, ctx: FileContext | None) -> FileContext | None:
        self._forget(key)
        self._files[key] = ctx
        self._size += ctx.size if ctx is not None else 0
        self._evict(MAX_WORKING_SOURCE, key)
        return ctx

    def _evict(self, bound: int, keep: str) -> None:
        """Forgets the least recently used files until their sources fit `bound`. The file being
        checked stays: its findings' nodes must be the nodes of its one tree."""
        evictable = (other for other in list(self._files) if other not in (keep, self._checking))
        while self._size > bound and (oldest := next(evictable, None)) is not None:
            self._forget(oldest)

    def _forget(self, key: str) -> None:
        if key not in self._files:
            return
        ctx = self._files.pop(key)
        self._size -= ctx.size if ctx is not None else 0
        for memo_key in self._memo_by_file.pop(key, ()):
            self._unlearn(memo_key)

    def _unlearn(self, memo_key: object) -> None:
        """Drops a memo entry and every file's note of it: a key left in another file's set
        keeps what it was made of (a `Klass` of an evicted file, so that file's `ClassDef`)."""
        self.memo.pop(memo_key, None)
        for file in self._memo_files.pop(memo_key, ()):
            keys = self._memo_by_file.get(file)
            if keys is not None:
                keys.discard(memo_key)

    def importers(self, ctx: FileContext, package: Path | None = None) -> list[tuple[FileContext, frozenset[str]]]:
        """Files of the same package or project that import `ctx`'s module: the callers that may
        pass it tensors or build its classes, each with the names it binds to that module or to
        what it defines. The nearest MAX_CALLER_FILES of them (same folder
        first): a helper every model file imports (`models/_utils.py`, `modeling_utils.py`)
        would otherwise cost an analysis of the whole package, and its nearest callers are the
        ones that use it the way it was written for. `package` (a package's `__init__.py` read
        through): files inside that package count only where they bind the module itself (`from
        torchaudio import functional as F`), not a name it re-exports (`from timm.layers import
        create_conv2d` in every timm model); its users outside count either way (`import
        torchaudio`, `from x_transformers import ContinuousTransformerWrapper`)."""
        here = Path(ctx.path)
        root = scan_root(here)
        self.scanned_roots.add(key_of(root))
        found: list[tuple[FileContext, frozenset[str]]] = []
        name = (
            here.parent.name if here.name == "__init__.py" else here.stem
        )  # a package is imported by its folder's name
        index = self._import_index(root)
        pool = index.mentions.get(name, [])
        if package is not None:
            inside = set(index.bound.get(name, ()))
            pool = [candidate for candidate in pool if not candidate.is_relative_to(package) or candidate in inside]
        candidates = sorted(pool, key=lambda candidate: (_distance(candidate, here), str(candidate)))
        for candidate in candidates:
            if len(found) == MAX_CALLER_FILES:
                break
            if key_of(candidate) == key_of(here):
                continue
            other = self.file(candidate)
            names = (
                frozenset(
                    local
                    for local in (*other.imports.relative, *other.imports.aliases)
                    if _imports_file(other, local, here)
                    and (package is None or not candidate.is_relative_to(package) or _binds_module(other, local))
                )
                if other is not None
                else frozenset()
            )
            if other is not None and names:
                found.append((other, names))
        return found

    def registering(self, ctx: FileContext, name: str) -> list[FileContext]:
        """The files of the project that decorate their definitions with a method of `ctx`'s
        module-level `name` under that same name (`@NECKS.register_module()` in `necks/pafpn.py`,
        `NECKS` imported from `builder.py`): importing them is what fills it."""
        here = Path(ctx.path)
        key = (key_of(here), name)
        if key not in self._registering:
            pool = self._import_index(scan_root(here)).decorating.get(name, [])
            found: list[Path] = []
            for candidate in sorted(pool, key=lambda candidate: (_distance(candidate, here), str(candidate))):
                if len(found) == MAX_REGISTERING_FILES:
                    break
                other = self.file(candidate) if key_of(candidate) != key[0] else None
                if other is not None and name in _receivers(other) and self._defined_in(other, name) == key:
                    found.append(candidate)
            self._registering[key] = tuple(found)
        return [other for path in self._registering[key] if (other := self.file(path)) is not None]

    def registries_of(self, ctx: FileContext) -> list[FileContext]:
        """The files defining the registries `ctx`'s decorators register into from elsewhere
        (`builder.py` for `@NECKS.register_module()` in `pafpn.py`): its classes are built by
        whoever builds from them, so their callers are `ctx`'s callers."""
        found: dict[str, FileContext] = {}
        for receiver in sorted(_receivers(ctx) - ctx.assignments.keys()):
            defined = self._defined_in(ctx, receiver)
            other = self.file(Path(defined[0])) if defined is not None else None
            if other is not None:
                found.setdefault(key_of(other.path), other)
        return list(found.values())

    def _defined_in(self, ctx: FileContext, name: str, hops: int = 4) -> tuple[str, str] | None:
        """The file and name an imported name is bound to where it is defined, through the
        packages re-exporting it (`from mmdet.models import NECKS`, bound in `builder.py`)."""
        found = self.resolve_name(ctx, name)
        if found is None:
            return None
        other, there = found
        if hops and there not in other.assignments and there not in other.classes and there not in other.functions:
            return self._defined_in(other, there, hops - 1)
        return key_of(other.path), there

    def hooks_modules(self, ctx: FileContext) -> bool:
        """Whether a file of `ctx`'s package or project puts a full backward hook on a module:
        only there can a caller make an in-place write of `ctx` write a hooked view."""
        root = scan_root(Path(ctx.path))
        self._import_index(root)
        return key_of(root) in self._hooking_roots

    def _import_index(self, root: Path) -> _ImportIndex:
        """For a package root, once per run: which files mention which module names in imports."""
        key = key_of(root)
        if key not in self._import_indexes:
            index = _ImportIndex()
            for candidate in layout.caller_files(root):
                try:
                    text = candidate.read_text("utf-8", errors="replace")
                except OSError:
                    continue
                lines = [match.group(0) for match in _IMPORT_LINE.finditer(text)]
                for name in {word for line in lines for word in re.findall(r"\w+", line)}:
                    index.mentions.setdefault(name, []).append(candidate)
                for name in {word for line in lines for word in re.findall(r"\w+", _imported_names(line))}:
                    index.bound.setdefault(name, []).append(candidate)
                if _BACKWARD_HOOK_CALL.search(text):
                    self._hooking_roots.add(key)
                for name in set(_METHOD_DECORATOR.findall(text)):
                    index.decorating.setdefault(name, []).append(candidate)
            self._import_indexes[key] = index
        return self._import_indexes[key]

    def resolve_class(self, ctx: FileContext, name: str) -> ClassInfo | None:
        found = self._resolve(ctx, name, lambda other, short: other.classes.get(short))
        return found[1] if found is not None else None

    def resolve_function(self, ctx: FileContext, name: str) -> tuple[FileContext, cst.FunctionDef] | None:
        return self._resolve(ctx, name, lambda other, short: other.functions.get(short))

    def resolve_name(self, ctx: FileContext, name: str) -> tuple[FileContext, str] | None:
        """The project file and module-level name an imported name stands for."""
        target = _imported_file(ctx, name)
        if target is None:
            return None
        other = self.file(target[0])
        return (other, target[1]) if other is not None and target[1] else None

    def module_file(self, ctx: FileContext, name: str) -> FileContext | None:
        """`import utils.ops as ops` / `from . import layers`: the project file a name is."""
        target = _imported_file(ctx, name)
        if target is None or target[1]:
            return None
        return self.file(target[0])

    def _resolve(
        self, ctx: FileContext, name: str, lookup: Callable[[FileContext, str], T | None]
    ) -> tuple[FileContext, T] | None:
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

    def class_file(self, info: ClassInfo) -> FileContext | None:
        key = key_of(info.path)
        ctx = self._files.get(key)
        if ctx is not None and self._reads:
            self._reads[-1].add(key)
        return ctx if ctx is not None else self.file(Path(info.path))


def key_of(path: str | Path) -> str:
    return _key_of(str(path))


@functools.lru_cache(maxsize=8192)
def _key_of(path: str) -> str:
    """Asked for on every call between functions; the working directory does not change."""
    return os.path.normpath(os.path.abspath(path))


def scan_root(path: Path) -> Path:
    """Where the callers of a file may live: its project (scripts import its packages
    absolutely, `train.py` beside `utils/ops.py`), else its outermost package, else the
    scripts beside it."""
    project = layout.project_root(path)
    if project is not None:
        return project
    package = layout.package_root(path)
    return package if package is not None else path.parent


def _distance(path: Path, other: Path) -> int:
    """Folders between two files: 0 for siblings."""
    folders = [Path(os.path.abspath(path)).parent, Path(os.path.abspath(other)).parent]
    common = len(Path(os.path.commonpath(folders)).parts)
    return sum(len(folder.parts) for folder in folders) - 2 * common


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


@dataclass
class _ImportIndex:
    """Words of a project's import lines, and the files they are in: every word (`mentions`), and
    the names the lines bind (`bound`: `functional` of `from torchaudio import functional`)."""

    mentions: dict[str, list[Path]] = field(default_factory=dict)
    bound: dict[str, list[Path]] = field(default_factory=dict)
    decorating: dict[str, list[Path]] = field(default_factory=dict)  # `@NECKS.register_module()`: NECKS


def _imported_names(line: str) -> str:
    """The part of an import line naming what it binds: after `import` (`import a.b` binds `a`,
    which is a word of it too)."""
    return line.split(" import ", 1)[1] if line.lstrip().startswith("from ") and " import " in line else line


def _binds_module(ctx: FileContext, local: str) -> bool:
    found = _imported_file(ctx, local)
    return found is not None and found[1] == ""


def _imports_file(ctx: FileContext, local: str, target: Path) -> bool:
    found = _imported_file(ctx, local)
    return found is not None and key_of(found[0]) == key_of(target)


def _imported_file(ctx: FileContext, local: str) -> tuple[Path, str] | None:
    """The project file a name was imported from, and its name there ("" for a module)."""
    if local not in ctx.imported_files:
        ctx.imported_files[local] = _find_imported_file(ctx, local)
    return ctx.imported_files[local]


def _find_imported_file(ctx: FileContext, local: str) -> tuple[Path, str] | None:
    here = Path(ctx.path).parent
    if local in ctx.imports.relative:
        level, module, name = ctx.imports.relative[local]
        return _module_file(_import_bases(here, level)[0], module, name)
    qualname = ctx.imports.aliases.get(local)
    if qualname is None:
        return _star_imported_file(ctx, local)
    if is_torch(qualname):
        return None
    module, _, name = qualname.rpartition(".")
    for base in _import_bases(here, 0):
        found = _module_file(base, module, name)
        if found is not None:
            return found
    return None


def _star_imported_file(ctx: FileContext, local: str) -> tuple[Path, str] | None:
    """The project file a `from module import *` took `local` from: the last such import of a
    module binding it (`from GNN import *` bringing the layer classes a model picks)."""
    if local.startswith("_"):
        return None  # a star import leaves private names out
    here = Path(ctx.path).parent
    for level, module in reversed(ctx.imports.stars):
        for base in _import_bases(here, level):
            found = _own_file(base.joinpath(*module.split(".")) if module else base)
            if found is not None and local in _attributes_bound(found):
                return found, local
    return None


def _import_bases(here: Path, level: int) -> list[Path]:
    """Where an import of `level` dots (0: absolute) made in the folder `here` looks."""
    if not level:
        return absolute_import_bases(here)
    base = here
    for _ in range(level - 1):
        base = base.parent
    return [base]


def _own_file(folder: Path) -> Path | None:
    """The file of the module `folder` names: `folder.py`, else the package's `__init__.py`."""
    return next(
        (candidate for candidate in (folder.with_suffix(".py"), folder / "__init__.py") if candidate.is_file()), None
    )


def absolute_import_bases(here: Path) -> list[Path]:
    """Where an absolute import of a project module may resolve, in Python's order for a script
    run from its folder: above the outermost package; the script's own folder; the project root."""
    probe = here / "__probe__.py"
    bases = [layout.import_root(probe)]
    for extra in (here, layout.project_root(probe)):
        if extra is not None and extra not in bases:
            bases.append(extra)
    return bases


def _module_file(base: Path, module: str, name: str) -> tuple[Path, str] | None:
    """The file `from <base>.<module> import <name>` reads `name` from, and the name there: as
    Python looks it up, the package's own attribute first (`models/__init__.py` binding the class
    `TransE` of its module `models/TransE.py`), then a module of that package (`from pkg import
    mod`, `from . import layers`), else the package's or module's own file."""
    folder = base.joinpath(*module.split(".")) if module else base
    for candidate in (folder / f"{name}.py", folder / name / "__init__.py"):
        if candidate.is_file():
            package = folder / "__init__.py"
            if name in _attributes_bound(package):  # `from .TransE import TransE` in it: the class
                return package, name
            return candidate, ""
    own = _own_file(folder) if module else None
    return (own, name) if own is not None else None


def _attributes_bound(package: Path) -> frozenset[str]:
    """The names a package's `__init__.py` binds at its top level to something other than one of
    its own modules: definitions, assignments, `from .x import name`. Read with `ast` (the file
    may never be analysed), once per version of the file."""
    try:
        stat = package.stat()
    except OSError:
        return frozenset()
    return _top_level_attributes(str(package), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=256)
def _top_level_attributes(path: str, _mtime_ns: int, _size: int) -> frozenset[str]:
    own = Path(path).parent.name  # `from augment import functional` in augment/: its own module
    try:
        tree = ast.parse(Path(path).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return frozenset()
    names: set[str] = set()
    todo = list(tree.body)
    while todo:
        statement = todo.pop()
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(statement.name)
        elif isinstance(statement, ast.ImportFrom) and (statement.module or own).rsplit(".", 1)[-1] != own:
            names.update(alias.asname or alias.name for alias in statement.names if alias.name != "*")
        elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            names.update(target.id for target in targets if isinstance(target, ast.Name))
        elif isinstance(statement, (ast.If, ast.Try)):
            todo.extend(statement.body + statement.orelse)
            todo.extend(statement.finalbody if isinstance(statement, ast.Try) else [])
            todo.extend(child for handler in getattr(statement, "handlers", []) for child in handler.body)
    return frozenset(names)
