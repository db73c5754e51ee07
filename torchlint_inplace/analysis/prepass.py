"""A cheap pre-pass with Python's `ast` that proves a file cannot produce a finding, so LibCST
never parses it (Python's parser is about 6x faster than LibCST's: 1.5 s against 9.7 s of CPU
for timm's 126 kLOC). It skips 52% of torch's own files and 27% of timm's.

Its agreement with the interpreter is tested, not argued: tests/test_prepass.py runs the full
analysis on every file it skips among the fixtures, a sample of torch's sources and a generated
sample (tests/prepass_sample.py) that spells each write path of the interpreter in every setting
below, and fails on any finding. What follows is how the pre-pass reasons, and why.

The pre-pass keeps any file where the interpreter might reach a `Mutation`:

1. `FunctionInterpreter.write` with a tensor target. Its callers are the *write sites*:
   a method call whose name is in `inplace_methods` or `inplace_view_methods`, a subscript
   store (`x[i] = v`, also as a for / with / starred target), any augmented assignment, a torch
   in-place function (`inplace_functions`), a functional whose `inplace` flag may be true, an
   `out=` argument, and an inplace module: built with an `inplace` flag that may be true (by
   keyword, position, `**{"inplace": ...}` or `.inplace = ...`), looked up with
   `getattr(nn, name)`, or its class used as a value (`act_layer=nn.ReLU` may be called with a
   positional flag); the write happens later, at `self.act(x)`: always kept.
   Calls into project code apply the callee's summary, whose writes come from write sites in
   the callee's file (reported there) — except writes done by an inplace activation, which the
   caller reports at its own call site, and writes inside an `autograd.Function.forward`,
   which its contract reports: see 4.
2. `ctx.mark_dirty` in an `autograd.Function` (TIP005 without any write): kept.
3. `.step()` and a `backward` in one file (TIP009), or a `.step()` and a `state_dict()` (a
   snapshot of the parameters the step rewrites, read stale afterwards): kept.
4. Project imports: a file importing another project file (relative, or an absolute import
   that resolves under the package root exactly as `analysis.project` resolves it) is kept if
   a file reachable through such imports holds an inplace-activation write site, or, for a
   file with an `autograd.Function` class, any write site. A file that only imports is
   followed for the names imported from it, as the interpreter follows a re-export.

A write site is harmless, and does not keep its file, when one of these holds:

- *Dead*: the written expression can never evaluate to a tensor. The interpreter's tensors come
  only from a function's parameters (all of them, `*args` and `**kwargs` too, in a summary run),
  calls in torch's tensor namespaces with a tensor argument, torch factories (the legacy
  `torch.FloatTensor(n)` too), `nn.Parameter`, torch modules and optimizers (their
  attributes), `self.<attr>`, module-level values (of the
  file, or of a project file imported), and expressions over those; lists and dicts hold what
  is put in them (displays, `append`, `d[k] = v`, seen through every name bound to them). A
  name holds a tensor only if something tensor-valued is assigned to it in the same function
  or at module level (the interpreter never evaluates lambdas into names; a comprehension
  holds what its element may hold, its loop names holding what their iterables may).
  `_TensorJudge` below over-approximates that, flow-insensitively, to a fixpoint. Attribute
  chains lose tensor-ness except `.data`, `.grad`, view attributes, names assigned before and
  attributes of names that may hold a tensor or an object with tensors (`m.weight`,
  `consts.G`, `Holder.W`), as `eval_attribute` does. A nested function (a lambda too) also
  holds what its enclosing function's names may hold: it runs with them as its arguments
  (`engine.enclose`).
- *A Python container*: the written name is only ever bound to a list, tuple, dict or set
  (`*args`, `**kwargs` included): storing into it or growing it writes no tensor
  (`store_item`, `list_method`).
- *Growing a Python object*: an augmented assignment whose operand is a list, tuple, dict or
  set display, a comprehension or a string (`layers += [block]`): the interpreter writes
  nothing there (`exec_augassign`), as a tensor would raise TypeError.
- *Initialisation*: `torch.nn.init.*` / `torch.nn.utils.*` calls return before writing
  (`call_torch`), when every import binding of the call's head resolves there.
- *Inert under no_grad*: the enclosing function is decorated `@torch.no_grad()` /
  `@torch.inference_mode()` (resolved through imports), does not mention `enable_grad` or
  `set_grad_enabled`, and is not in an `autograd.Function` class; the write is not an in-place
  torch function or inplace functional (whose write, hidden from the names sharing the tensor,
  makes their later reads stale in any grad mode: the values are wrong either way); and the
  written expression cannot alias one of the function's own parameters. Then its state starts
  without saves and records none (`record_op`, `apply_module` and `call_project` save only with
  grad enabled), so `hazard_of` finds nothing (leaf and multi-view hazards need grad enabled
  too), no stale read is recorded (only hidden writes record them), and the write is neither in
  the function's summary nor marks the file as an argument writer (both need a parameter's
  storage), so no caller anywhere can turn it into a finding.

A file `ast` cannot parse is never skipped: the runner reports its syntax error (TIP000).
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import source
from ..recursion import deep_recursion
from .classes import AUTOGRAD_FUNCTION_BASES
from .imports import _CANONICAL_PREFIXES, is_torch
from .project import _module_file, absolute_import_bases, key_of
from .torch_facts import torch_facts
from .vocabulary import GRAD_OFF as _GRAD_OFF
from .vocabulary import GRAD_ON as _GRAD_ON
from .vocabulary import LEGACY_CONSTRUCTORS as _LEGACY_CONSTRUCTORS
from .vocabulary import NON_TENSOR_METHODS as _NON_TENSOR_METHODS
from .vocabulary import SAFE_INPLACE_PREFIXES as _SAFE_INPLACE_PREFIXES
from .vocabulary import SET_GRAD as _SET_GRAD

_GRAD_ON_NAMES = frozenset(name.rsplit(".", 1)[-1] for name in _GRAD_ON | _SET_GRAD)
_FUNCTION_BASE_NAMES = frozenset(name.rsplit(".", 1)[-1] for name in AUTOGRAD_FUNCTION_BASES)
_ALIASING_ATTRIBUTES = frozenset({"data", "grad"})
_BUILTINS = frozenset(dir(builtins))
# `analysis.syntax.never_tensor_operand` in `ast`'s terms (with string and bytes constants).
_NOT_TENSOR_OPERANDS = (ast.List, ast.Tuple, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp, ast.JoinedStr)
# Methods that put their arguments into a list or dict (`calls.list_method`, `dict_method`).
_CONTAINER_GROWTH = frozenset({"append", "extend", "insert", "update", "setdefault"})
_UNKNOWN = ast.Name(id="<unknown>", ctx=ast.Load())  # a flag whose value the scan cannot see


@dataclass(frozen=True)
class Verdict:
    """`reason` says why the file must be analysed; None means it cannot produce a finding.
    `dependencies` are the other files the verdict read (a results cache keys on them)."""

    reason: str | None
    dependencies: frozenset[str] = frozenset()
    parses: bool = True  # Python's parser accepted the file: the runner need not ask it again

    @property
    def skippable(self) -> bool:
        return self.reason is None


class PrePass:
    """One run's pre-pass. What it learns about a file is kept for the rest of the run, so a
    file reached through imports and checked itself is parsed once (files do not change
    during a run; a new run starts a new `PrePass`)."""

    def __init__(self) -> None:
        self._files: dict[str, _FileFacts] = {}

    def verdict(self, path: str, text: str) -> Verdict:
        facts = self._facts(Path(path), text)
        if facts.reason is not None:
            return Verdict(facts.reason, parses=facts.parses)
        reached = self._reachable(facts.imported)
        dependencies = frozenset(key_of(other) for other in reached)
        if any(self._facts(other).activation for other in reached):
            return Verdict("imports project code with an inplace activation", dependencies)
        if facts.autograd_class and any(self._facts(other).writes for other in reached):
            return Verdict("autograd.Function calling project code that writes in place", dependencies)
        return Verdict(None, dependencies)

    def _reachable(self, start: tuple[_ProjectImport, ...]) -> list[Path]:
        """Files whose definitions a call may run: imported files, and what those import in
        turn. A file that defines functions or classes may run anything it imports; one that
        only imports is followed for the names asked of it (`engine.imported` follows a
        re-export to the file that defines the name), or wholly when imported as a module."""
        seen: dict[str, Path] = {}
        asked: set[tuple[str, str]] = set()
        todo = list(start)
        while todo:
            item = todo.pop()
            key = key_of(item.path)
            if (key, item.name) in asked:
                continue
            asked.add((key, item.name))
            seen.setdefault(key, item.path)
            facts = self._facts(item.path)
            whole = facts.defines or not item.name
            todo.extend(other for other in facts.imported if whole or other.local == item.name)
        return list(seen.values())

    def _facts(self, path: Path, text: str | None = None) -> _FileFacts:
        key = key_of(path)
        known = self._files.get(key)
        if known is not None and (text is None or known.text_hash == hash(text)):
            return known
        if text is None:
            try:
                text = source.read(path).text
            except source.NotReadable:
                text = ""  # `analysis.project` cannot read it either: calls into it learn nothing
        self._files[key] = facts = _file_facts(path, text)
        return facts


def verdict(path: str, text: str) -> Verdict:
    """The verdict for one file, learning about its imports afresh."""
    return PrePass().verdict(path, text)


@dataclass(frozen=True)
class _FileFacts:
    text_hash: int
    reason: str | None  # why the file itself must be analysed, imports aside
    activation: bool  # holds an inplace-activation write site
    writes: bool  # holds any write site
    autograd_class: bool
    defines: bool  # holds functions or classes
    imported: tuple[_ProjectImport, ...]
    parses: bool = True


def _file_facts(path: Path, text: str) -> _FileFacts:
    try:
        tree = ast.parse(text, filename=str(path))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return _FileFacts(hash(text), "Python cannot parse it", False, False, False, False, (), parses=False)
    # The scan recurses once per link of an expression chain (`x + x + ...`), as the analysis does.
    with deep_recursion():
        scanner = _Scanner(tree)
        imported = _project_imports(path, scanner.imports)
        reason = scanner.reason({item.local for item in imported})
    return _FileFacts(
        hash(text),
        reason,
        scanner.activation,
        bool(scanner.sites) or scanner.activation,
        bool(scanner.autograd_classes),
        bool(scanner.functions or scanner.classes),
        tuple(imported),
    )


# ----------------------------------------------------------------------------- imports


@dataclass(frozen=True)
class _Import:
    level: int
    module: str
    name: str
    local: str  # the name it binds in the importing file


def _canonical(full: str) -> str:
    for prefix, replacement in _CANONICAL_PREFIXES:
        if full.startswith(prefix):
            tail = full[len(prefix) :]
            full = replacement + (tail.rsplit(".", 1)[-1] if prefix == "torch.nn.modules." else tail)
    return full


def _dotted(expr: ast.expr) -> str | None:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        head = _dotted(expr.value)
        return None if head is None else f"{head}.{expr.attr}"
    return None


@dataclass(frozen=True)
class _ProjectImport:
    local: str  # the name the import binds
    path: Path  # the project file it reads
    name: str  # the name read there; "" when the file itself is imported as a module


def _project_imports(path: Path, imports: list[_Import]) -> list[_ProjectImport]:
    """The project files these imports name, resolved as `analysis.project._imported_file` does."""
    if not imports:
        return []
    here = path.parent
    bases = absolute_import_bases(here)
    found = []
    for item in imports:
        if item.level:
            base = here
            for _ in range(item.level - 1):
                base = base.parent
            target = _module_file(base, item.module, item.name)
        elif is_torch(item.module or item.name):
            continue
        else:
            target = next(filter(None, (_module_file(base, item.module, item.name) for base in bases)), None)
        if target is not None:
            found.append(_ProjectImport(item.local, *target))
    return found


# ----------------------------------------------------------------------------- one file

_Position = tuple[int, int]


def _start(node: ast.expr | ast.stmt) -> _Position:
    return (node.lineno, node.col_offset)


def _end(node: ast.expr | ast.stmt) -> _Position:
    """Where `node` ends (Python's parser always says; a node built by hand ends where it starts)."""
    return (node.end_lineno or node.lineno, node.end_col_offset or node.col_offset)


@dataclass
class _Scope:
    """A function body (or the module's top level) as the interpreter runs it."""

    body: tuple[_Position, _Position]  # where its own statements lie
    params: list[str]
    no_grad: bool
    assignments: list[tuple[ast.expr, ast.expr]] = field(default_factory=list)
    aliases: list[tuple[str, str]] = field(default_factory=list)  # `a = b`: (a, b)
    containers: set[str] = field(default_factory=set)  # names only ever bound to a list, dict, ...
    varargs: set[str] = field(default_factory=set)  # `*args`, `**kwargs`: a tuple and a dict
    tensor_names: set[str] | None = None
    param_names: set[str] | None = None
    enclosing: _Scope | None = None  # the function a nested function is defined in
    owner: str | None = None  # a method's `self`: writes into its attributes are its callers'

    def writes_owner(self, written: ast.expr) -> bool:
        """`self.queue[:, ptr:] = keys.T` under `@torch.no_grad()`: nothing records the write,
        but the caller may have saved the attribute for backward before calling the method."""
        while isinstance(written, (ast.Attribute, ast.Subscript)):
            written = written.value
            if isinstance(written, ast.Name):
                return written.id == self.owner
        return False

    def contains(self, position: _Position) -> bool:
        return self.body[0] <= position <= self.body[1]


@dataclass(frozen=True)
class _Site:
    written: ast.expr
    what: str
    hidden: bool  # an in-place torch function or inplace functional: its write is hidden from readers


class _Scanner:
    """One walk over a file's tree: write sites, assignments, functions, classes, imports."""

    def __init__(self, tree: ast.Module) -> None:
        self.facts = torch_facts()
        # `calls.call_method`: a view-changing in-place method (`t_`, `unsqueeze_`) writes too.
        self.inplace_methods = self.facts.inplace_methods.keys() | self.facts.inplace_view_methods
        self.sites: list[_Site] = []
        self.assignments: list[tuple[ast.expr, ast.expr]] = []
        self.functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
        self.lambdas: list[ast.Lambda] = []
        self.classes: list[ast.ClassDef] = []
        self.imports: list[_Import] = []
        self.aliases: dict[str, set[str | None]] = {}  # local name -> what it may stand for (None: relative)
        self.grad_on_mentions: list[_Position] = []
        self.activation = False
        self.early_reason: str | None = None
        self.global_names: set[str] = set()
        self._growth: set[int] = set()  # the values of `items.append(...)` and the like, as assignments
        self._iterated: set[int] = set()  # what `for` loops iterate: their targets bind its elements
        self._steps: list[ast.Call] = []
        self._read_across_steps = False  # a backward or a state_dict(): what a step can make wrong
        self._calls: list[ast.Call] = []
        self._module_classes: list[ast.Name | ast.Attribute] = []  # mentions of an inplace module's name
        self._type_tests: set[int] = set()  # classes only compared with (`isinstance(m, nn.ReLU)`, `t == nn.ELU`)
        # One handler per node type: `ast.walk` gives plain `AST`s, each handler takes its type.
        handlers: dict[type[ast.AST], Callable[[Any], None]] = {
            ast.Call: self._calls.append,
            ast.Subscript: self._subscript,
            ast.Assign: self._assign,
            ast.AnnAssign: self._ann_assign,
            ast.AugAssign: self._aug_assign,
            ast.For: self._for,
            ast.AsyncFor: self._for,
            ast.With: self._with,
            ast.AsyncWith: self._with,
            ast.NamedExpr: self._named,
            ast.FunctionDef: self.functions.append,
            ast.AsyncFunctionDef: self.functions.append,
            ast.Lambda: self.lambdas.append,
            ast.ClassDef: self.classes.append,
            ast.Import: self._import,
            ast.ImportFrom: self._import_from,
            ast.Name: self._name,
            ast.Attribute: self._attribute,
            ast.keyword: self._keyword,
            ast.Dict: self._dict,
            ast.Compare: self._compare,
        }
        for node in ast.walk(tree):
            handler = handlers.get(type(node))
            if handler is not None:
                handler(node)
        # Calls are judged once every import is known: an alias may be bound below its use.
        for call in self._calls:
            self._call(call)
        self._module_class_values({id(call.func) for call in self._calls})
        if self._steps and self._read_across_steps:
            self.early_reason = self.early_reason or (
                f"optimizer step and backward() or state_dict() at line {self._steps[0].lineno}"
            )
        self.autograd_classes = [
            node for node in self.classes if any(self._names_function_base(base) for base in node.bases)
        ]
        self.defined = {node.name for node in (*self.functions, *self.classes)}

    # ------------------------------------------------------------------ verdict

    def reason(self, project_names: set[str]) -> str | None:
        """Why the file must be analysed, if it must. `project_names` are the names its imports
        bind to project files: a module-level value there may be a tensor."""
        if self.early_reason is not None:
            return self.early_reason
        scopes = self._scopes()
        # A function reads a name it does not bind as the module's (`engine.global_value`): a
        # module-level tensor, a project import (a tensor of another file, a module whose
        # attributes are), a class of the file (`Holder.W`).
        self.global_names = project_names | {node.name for node in self.classes}
        self.global_names = self._names(scopes[0], params_only=False)
        for site in self.sites:
            position = _start(site.written)
            scope = max((scope for scope in scopes if scope.contains(position)), key=lambda scope: scope.body[0])
            if isinstance(site.written, ast.Name) and site.written.id in scope.containers:
                continue
            if not self._may_tensor(scope, site.written, params_only=False):
                continue
            in_function_class = any(_start(node) <= position <= _end(node) for node in self.autograd_classes)
            if (
                scope.no_grad
                and not site.hidden
                and not in_function_class
                and not self._may_tensor(scope, site.written, params_only=True)
                and not scope.writes_owner(site.written)
            ):
                continue
            return f"{site.what} at line {site.written.lineno}"
        return None

    def _scopes(self) -> list[_Scope]:
        scopes = [_Scope(((0, 0), (1 << 62, 0)), [], False)]
        methods = {id(statement) for node in self.classes for statement in node.body}
        for func in self.functions:
            body = (_start(func.body[0]), _end(func))
            varargs = {arg.arg for arg in (func.args.vararg, func.args.kwarg) if arg is not None}
            owner, params = self._params(func, id(func) in methods)
            scopes.append(_Scope(body, [*params, *varargs], self._no_grad(func), varargs=varargs, owner=owner))
        for lam in self.lambdas:  # a lambda is a function too (`lambda m, i, o: o.mul_(2)` as a hook)
            args = lam.args
            names = [
                arg.arg for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if arg
            ]
            scopes.append(_Scope((_start(lam.body), _end(lam)), names, False))
        for target, value in self.assignments:
            position = _start(target)
            scope = max((scope for scope in scopes if scope.contains(position)), key=lambda scope: scope.body[0])
            scope.assignments.append((target, value))
            if isinstance(target, ast.Name) and isinstance(value, ast.Name):
                scope.aliases.append((target.id, value.id))
        for scope in scopes[1:]:
            around = [other for other in scopes[1:] if other is not scope and other.contains(scope.body[0])]
            scope.enclosing = max(around, key=lambda other: other.body[0]) if around else None
        for scope in scopes:
            scope.containers = self._containers(scope)
        return scopes

    def _containers(self, scope: _Scope) -> set[str]:
        """Local names bound only to list, tuple, dict or set displays, comprehensions or
        `dict(...)`-like builtins: a write to one of them (`d["k"] = t`, `items += t`) stores
        into or grows a Python container (`store_item`, `list_method`), whatever it holds."""
        containers: set[str] = set(scope.varargs)
        others: set[str] = set(scope.params) - scope.varargs
        for target, value in scope.assignments:
            if isinstance(target, ast.Subscript) or id(value) in self._growth:
                continue  # a store into the container, not a binding of its name
            bound = _bound_names(target)
            if isinstance(target, ast.Name) and id(value) not in self._iterated and self._is_container(value):
                containers.update(bound)
            else:
                others.update(bound)
        return containers - others

    def _is_container(self, value: ast.expr) -> bool:
        if isinstance(value, (ast.List, ast.Tuple, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)):
            return True
        func = value.func if isinstance(value, ast.Call) else None
        return (
            isinstance(func, ast.Name)
            and func.id in ("list", "tuple", "dict", "set")
            and func.id not in self.aliases
            and func.id not in self.defined
        )

    def _params(self, func: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> tuple[str | None, list[str]]:
        """A method's first parameter (`self` / `cls` / `ctx`), apart, and the others."""
        args = func.args
        params = [arg.arg for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
        static = any(_dotted(decorator) == "staticmethod" for decorator in func.decorator_list)
        return (params[0], params[1:]) if method and params and not static else (None, params)

    def _no_grad(self, func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        decorated = any(
            self._resolves_all(decorator.func if isinstance(decorator, ast.Call) else decorator, _GRAD_OFF)
            for decorator in func.decorator_list
        )
        if not decorated or self._grad_on_renamed():
            return False
        whole = (_start(func), _end(func))
        return not any(whole[0] <= mention <= whole[1] for mention in self.grad_on_mentions)

    def _grad_on_renamed(self) -> bool:
        """`from torch import enable_grad as eg`: mentions of `eg` would go unseen, so no
        function of this file counts as inert under no_grad."""
        return any(
            local not in _GRAD_ON_NAMES and target is not None and target.rsplit(".", 1)[-1] in _GRAD_ON_NAMES
            for local, targets in self.aliases.items()
            for target in targets
        )

    # ------------------------------------------------------------------ nodes

    def _site(self, written: ast.expr, what: str, activation: bool = False) -> None:
        self.sites.append(_Site(written, what, activation))
        self.activation |= activation

    def _subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, ast.Store):
            self._site(node.value, "index assignment")

    def _assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self.assignments.append((target, node.value))
            if isinstance(target, ast.Attribute) and target.attr == "inplace" and not _is_false(node.value):
                self._makes_inplace(node, "`.inplace = ...`")  # `m.inplace = True` over `self.modules()`

    def _ann_assign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.assignments.append((node.target, node.value))

    def _aug_assign(self, node: ast.AugAssign) -> None:
        # `n += t` rebinds a non-tensor `n` to a tensor: the target takes the operand's kind.
        self.assignments.append((node.target, node.value))
        if (
            isinstance(node.value, _NOT_TENSOR_OPERANDS)
            or isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, (str, bytes))
        ):
            return  # `layers += [block]`: the interpreter writes nothing (a tensor would raise TypeError)
        # `x[i] += v` is an index write into `x` (`_subscript`), or, when `x` is a list or a dict,
        # writes its element `x[i]` in place.
        self._site(node.target, "augmented assignment")

    def _for(self, node: ast.For | ast.AsyncFor) -> None:
        self.assignments.append((node.target, node.iter))
        self._iterated.add(id(node.iter))

    def _with(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            if item.optional_vars is not None:
                self.assignments.append((item.optional_vars, item.context_expr))

    def _named(self, node: ast.NamedExpr) -> None:
        self.assignments.append((node.target, node.value))

    def _import(self, node: ast.Import) -> None:
        for alias in node.names:
            module, _, name = alias.name.rpartition(".")
            if alias.asname is not None:
                self.aliases.setdefault(alias.asname, set()).add(alias.name)
                self.imports.append(_Import(0, module, name, alias.asname))
            else:
                head = alias.name.split(".")[0]
                self.aliases.setdefault(head, set()).add(head)
                # `import pkg.layers` binds `pkg`, and `pkg.layers.f` reads layers.py.
                self.imports.append(_Import(0, module, name, head))

    def _import_from(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        for alias in node.names:
            if alias.name == "*":
                continue
            local = alias.asname or alias.name
            self.aliases.setdefault(local, set()).add(None if node.level else f"{module}.{alias.name}")
            self.imports.append(_Import(node.level, module, alias.name, local))

    def _name(self, node: ast.Name) -> None:
        if node.id in _GRAD_ON_NAMES:
            self.grad_on_mentions.append(_start(node))
        if node.id in self.facts.inplace_modules:
            self._module_classes.append(node)

    def _attribute(self, node: ast.Attribute) -> None:
        if node.attr in _GRAD_ON_NAMES:
            self.grad_on_mentions.append(_start(node))
        if node.attr in self.facts.inplace_modules:
            self._module_classes.append(node)

    def _keyword(self, node: ast.keyword) -> None:
        if node.arg == "inplace" and not _is_false(node.value):
            # Whoever the callee is (`act_layer(inplace=True)`, `partial(nn.ReLU, inplace=True)`),
            # construction code is interpreted: it may build an in-place module.
            self._makes_inplace(node.value, "`inplace=` argument")
        elif node.arg in self.facts.parameter_writing_modules.values() and not (
            isinstance(node.value, ast.Constant) and node.value.value is None
        ):
            self._makes_inplace(node.value, f"`{node.arg}=` argument")

    def _compare(self, node: ast.Compare) -> None:
        self._type_test(node.left, *node.comparators)

    def _type_test(self, *operands: ast.expr) -> None:
        for operand in operands:
            self._type_tests.update(
                id(node) for node in (operand, *(operand.elts if isinstance(operand, ast.Tuple) else ()))
            )

    def _dict(self, node: ast.Dict) -> None:
        for key, value in zip(node.keys, node.values, strict=True):  # one key (None for `**`) per value
            if isinstance(key, ast.Constant) and key.value == "inplace" and not _is_false(value):
                self._makes_inplace(value, '`"inplace"` key')  # `act_layer(**{"inplace": True})`

    def _module_class_values(self, called: set[int]) -> None:
        """An inplace module's class used as a value (`act_layer=nn.ReLU`, `{"relu": nn.ReLU}`,
        `class Act(nn.ReLU)`): whoever calls it may pass the flag positionally (`act_layer(True)`),
        here or in a file importing this one, and the interpreter follows the class there."""
        for node in self._module_classes:
            if id(node) in called or id(node) in self._type_tests or not isinstance(node.ctx, ast.Load):
                continue
            short = node.id if isinstance(node, ast.Name) else node.attr
            if any(
                name is not None and name.startswith("torch.nn") and name.endswith(f".{short}")
                for name in self.qualnames(node)
            ):
                self._makes_inplace(node, f"inplace module class `{short}` used as a value")
                return

    def _makes_inplace(self, node: ast.expr | ast.stmt, what: str) -> None:
        self.activation = True
        self.early_reason = self.early_reason or f"{what} at line {node.lineno}"

    def _call(self, call: ast.Call) -> None:
        facts = self.facts
        func = call.func
        if isinstance(func, ast.Attribute):
            if func.attr == "mark_dirty":
                self.early_reason = self.early_reason or f"ctx.mark_dirty at line {call.lineno}"
            elif func.attr == "step":
                self._steps.append(call)
            elif func.attr in ("backward", "state_dict"):
                self._read_across_steps = True
        if isinstance(func, (ast.Name, ast.Attribute)) and (_dotted(func) or "").endswith("backward"):
            self._read_across_steps = True
        for keyword in call.keywords:
            if keyword.arg == "out":
                self._site(keyword.value, "out= argument")
        if self._resolves_all(func, _SAFE_INPLACE_PREFIXES, prefix=True):
            return  # nn.init.* / nn.utils.*: return before writing anything
        arguments = [arg.value if isinstance(arg, ast.Starred) else arg for arg in call.args] + [
            keyword.value for keyword in call.keywords
        ]
        if isinstance(func, ast.Attribute):
            if func.attr in self.inplace_methods:
                self._site(func.value, f"`.{func.attr}()`")
            elif func.attr in _CONTAINER_GROWTH and _container_name(func.value) is not None:
                # `items.append(t)`, `d.update(k=t)`: the container now holds what it was given.
                grown = ast.Tuple(elts=arguments, ctx=ast.Load())
                self._growth.add(id(grown))
                self.assignments.append((func.value, grown))
        if isinstance(func, ast.Name) and func.id in ("isinstance", "issubclass") and len(call.args) == 2:
            self._type_test(call.args[1])
        if (
            isinstance(func, ast.Name)
            and func.id == "getattr"
            and call.args
            and self._resolves_all(call.args[0], ("torch.nn",), prefix=True)
        ):
            self._makes_inplace(call, "module class looked up by name")  # `getattr(nn, name)(True)`
        names = self._short_names(func)
        if not names:
            return
        if not names.isdisjoint(facts.inplace_functions):
            for argument in arguments:
                self._site(argument, "in-place torch function", activation=True)
        for short in names.intersection(facts.inplace_kwarg_functionals):
            if _may_be_true(_flag(call, facts.inplace_kwarg_functionals[short])):
                for argument in arguments:
                    self._site(argument, "inplace functional", activation=True)
        for short in names.intersection(facts.inplace_modules):
            if _may_be_true(_flag(call, facts.inplace_modules[short])):
                # The write happens wherever the module is called: keep the file.
                self._makes_inplace(call, f"inplace module `{short}`")

    # ------------------------------------------------------------------ names

    def qualnames(self, expr: ast.expr) -> set[str | None]:
        """What `imports.qualname` may return for `expr`, one per import binding of its head."""
        text = _dotted(expr)
        if text is None:
            return {None}
        head, _, rest = text.partition(".")
        targets = self.aliases.get(head)
        if not targets:
            return {None}
        return {None if target is None else _canonical(f"{target}.{rest}" if rest else target) for target in targets}

    def _resolves_all(self, expr: ast.expr, names: Collection[str], prefix: bool = False) -> bool:
        qualnames = self.qualnames(expr)
        if prefix:
            return all(name is not None and name.startswith(tuple(names)) for name in qualnames)
        return all(name in names for name in qualnames)

    def _short_names(self, func: ast.expr) -> set[str]:
        """The names a call's target may have in the torch tables: as written, and as imported."""
        text = _dotted(func)
        if text is None:
            return set()
        found = {text.rsplit(".", 1)[-1]}
        found.update(name.rsplit(".", 1)[-1] for name in self.qualnames(func) if name is not None)
        return found

    def _names_function_base(self, base: ast.expr) -> bool:
        text = _dotted(base)
        return (
            text is not None
            and text.rsplit(".", 1)[-1] in _FUNCTION_BASE_NAMES
            or any(name in AUTOGRAD_FUNCTION_BASES for name in self.qualnames(base))
        )

    # ------------------------------------------------------------------ tensor-ness

    def _may_tensor(self, scope: _Scope, expr: ast.expr, params_only: bool) -> bool:
        return _TensorJudge(self, self._names(scope, params_only), params_only).judge(expr)

    def _names(self, scope: _Scope, params_only: bool) -> set[str]:
        """Names (dotted, like the interpreter's environment) that may hold a tensor in `scope`;
        with `params_only`, that may alias one of its parameters. A fixpoint, flow-insensitive."""
        cached = scope.param_names if params_only else scope.tensor_names
        if cached is not None:
            return cached
        names = set(scope.params) if params_only else set(scope.params) | self.global_names
        if scope.enclosing is not None:
            # A nested function runs with the enclosing function's variables as its arguments
            # (`engine.enclose`): a tensor there may be written here, and is the caller's.
            names |= self._names(scope.enclosing, params_only=False)
        judge = _TensorJudge(self, names, params_only)
        changed = True
        while changed:
            changed = False
            for target, value in scope.assignments:
                bound = [name for name in _bound_names(target) if name not in names]
                if bound and judge.judge(value):
                    names.update(bound)
                    changed = True
            # A container grown with a tensor (`items.append(t)`, `d[k] = t`) is seen grown
            # through every name bound to it (`rebind_container`): `b = a; b.append(t)`.
            for alias, container in scope.aliases:
                if alias in names and container not in names:
                    names.add(container)
                    changed = True
        if params_only:
            scope.param_names = names
        else:
            scope.tensor_names = names
        return names


class _TensorJudge:
    """Whether an expression may evaluate to a tensor (or, with `params_only`, to an alias of a
    parameter), given the names that may hold one. Mirrors `FunctionInterpreter.eval`."""

    def __init__(self, scanner: _Scanner, names: set[str], params_only: bool) -> None:
        self.scanner = scanner
        self.names = names
        self.params_only = params_only
        self.view_attributes = scanner.facts.view_attributes | _ALIASING_ATTRIBUTES

    def judge(self, expr: ast.expr | None) -> bool:
        if expr is None:
            return False
        if isinstance(expr, ast.Name):
            return expr.id in self.names
        if isinstance(expr, ast.Attribute):
            text = _dotted(expr)
            if text is not None and text in self.names:
                return True
            if not self.params_only and (_root_name(expr) in self.names or _root_name(expr) == "self"):
                # An attribute of an object a caller passes or code built: a module's weight
                # (`model.fc.weight`), an instance's buffer — the interpreter evaluates
                # construction code and runs functions with what their callers pass.
                return True
            return expr.attr in self.view_attributes and self.judge(expr.value)
        if isinstance(expr, ast.Call):
            return self._call(expr)
        if isinstance(expr, (ast.BinOp, ast.Compare)):
            if self.params_only:
                return False  # a fresh result
            operands = [expr.left, expr.right] if isinstance(expr, ast.BinOp) else [expr.left, *expr.comparators]
            return any(map(self.judge, operands))
        if isinstance(expr, ast.UnaryOp):
            return not self.params_only and self.judge(expr.operand)
        if isinstance(expr, ast.Subscript):
            return self.judge(expr.value)
        if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
            return any(self.judge(element) for element in expr.elts)
        if isinstance(expr, ast.Dict):
            return any(self.judge(value) for value in expr.values)
        if isinstance(expr, ast.Starred):
            return self.judge(expr.value)
        if isinstance(expr, ast.IfExp):
            return self.judge(expr.body) or self.judge(expr.orelse)
        if isinstance(expr, ast.BoolOp):
            return any(map(self.judge, expr.values))
        if isinstance(expr, ast.NamedExpr):
            return self.judge(expr.value)
        if isinstance(expr, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            return self._comprehension(expr.generators, expr.elt)
        if isinstance(expr, ast.DictComp):
            return self._comprehension(expr.generators, expr.value)
        return False  # constants, lambdas, f-strings, await

    def _call(self, call: ast.Call) -> bool:
        arguments = [arg.value if isinstance(arg, ast.Starred) else arg for arg in call.args] + [
            keyword.value for keyword in call.keywords
        ]
        if any(map(self.judge, arguments)):
            return True
        func = call.func
        if not self.params_only and any(map(self._makes_tensor_from_nothing, self.scanner.qualnames(func))):
            return True
        if isinstance(func, ast.Attribute):
            if func.attr in _NON_TENSOR_METHODS and _dotted(func) not in self.names:
                return False
            if self.judge(func.value) or _dotted(func) in self.names:
                return True  # a tensor's method (a view, a result), or a name holding one
        if self.params_only:
            return False  # a call's result aliases no parameter but through a tensor method
        if (
            isinstance(func, ast.Name)
            and func.id in _BUILTINS
            and func.id not in self.scanner.aliases
            and func.id not in self.scanner.defined
        ):
            return False  # `range(3)`, `len(x)`: a builtin makes a tensor only from tensor arguments
        # Project code is run with what it is given: a function or method may return a tensor
        # it made itself (`self.mask()` returning `torch.ones(...)`); torch's own calls without
        # tensor arguments make tensors only as factories (above).
        return not all(name is not None and name.startswith("torch.") for name in self.scanner.qualnames(func))

    def _comprehension(self, generators: list[ast.comprehension], element: ast.expr) -> bool:
        """`eval_comprehension`: a list of its element, evaluated once with each loop's names
        holding what its iterable may hold (`[t for t in dtypes() if ...]` holds no tensor)."""
        names = set(self.names)
        for generator in generators:
            if _TensorJudge(self.scanner, names, self.params_only).judge(generator.iter):
                names.update(_bound_names(generator.target))
        return _TensorJudge(self.scanner, names, self.params_only).judge(element)

    def _makes_tensor_from_nothing(self, qualname: str | None) -> bool:
        """`call_torch` without tensor arguments: only `torch.*` factories, `nn.Parameter` and
        modules make a tensor (`torch.testing...dtypes()` and the like make none)."""
        if qualname is None or not qualname.startswith("torch."):
            return False
        namespace, _, short = qualname.rpartition(".")
        if namespace.startswith(("torch.nn", "torch.optim")) and short[:1].isupper():
            return True  # a module or an optimizer: its attributes hold tensors (`m.weight`)
        return (namespace == "torch" and self.scanner.facts.is_factory(short)) or qualname in _LEGACY_CONSTRUCTORS


def _root_name(expr: ast.expr) -> str | None:
    while isinstance(expr, (ast.Attribute, ast.Subscript, ast.Call)):
        expr = expr.func if isinstance(expr, ast.Call) else expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def _bound_names(target: ast.expr) -> list[str]:
    """The names an assignment to `target` may make hold a tensor: its names, and the
    container an item is stored into (`d["k"] = t`, `items[0] = t`)."""
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in _bound_names(element)]
    if isinstance(target, ast.Starred):
        return _bound_names(target.value)
    if isinstance(target, ast.Subscript):
        container = _container_name(target.value)
        return [container] if container is not None else []
    text = _dotted(target)
    return [text] if text is not None else []


def _flag(call: ast.Call, index: int) -> ast.expr | None:
    """The `inplace` argument of a call whose flag is its `index`-th positional parameter: its
    expression, `_UNKNOWN` where starred arguments or `**` may pass it, None where it is not."""
    keyword = next((keyword.value for keyword in call.keywords if keyword.arg == "inplace"), None)
    if keyword is not None:
        return keyword
    for position, argument in enumerate(call.args):
        if isinstance(argument, ast.Starred):
            return _UNKNOWN  # `nn.ReLU(*args)`: any later slot may be the flag
        if position == index:
            return argument
    return _UNKNOWN if any(keyword.arg is None for keyword in call.keywords) else None


def _may_be_true(flag: ast.expr | None) -> bool:
    """Whether the interpreter may find a flag true: anything but an absent or literal False one."""
    return flag is not None and not _is_false(flag)


def _container_name(expr: ast.expr) -> str | None:
    """The local name a store into `expr` grows (`d` of `d["k"]`, `d["k"]["j"]`): the
    interpreter tracks the lists and dicts of plain names only (`store_item`)."""
    while isinstance(expr, ast.Subscript):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def _is_false(expr: ast.expr | None) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is False
