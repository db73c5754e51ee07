"""One file's analysis: its entry points, and the runs and instances they reach.

The entry points of a file are its top-level code (a training script), the `forward` of each
class nobody in the file builds (built with its constructor's defaults: the configuration a
user gets), and every function or method no run reached (run with what its signature says).
Everything else is reached from those, with what the callers pass: a project function or
method is run per context (its arguments' abstract values) and memoised in the `Project`; a
project class is instantiated per set of constructor arguments by interpreting `__init__`. The
file's findings are those of every run reached whose write lies in the file.
"""

from __future__ import annotations

import builtins
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar, cast

import libcst as cst

from .arguments import Args, Binding, bind
from .builders import builds_only
from .classes import ClassInfo, FunctionRef
from .conditions import REACHED, Assumption, Condition
from .imports import dotted
from .instances import Instance, patched
from .interpreter import MAX_CALL_DEPTH, FunctionInterpreter
from .model import Mutation
from .params import function_grad_enabled, is_entry, tensor_list_parameters, tensor_parameters
from .project import FileContext, Project, key_of
from .shared import shared
from .state import ModuleHooks, State, Step, next_order
from .summaries import Summary, SummaryRecorder
from .syntax import annotation_text, descendants, named_params, positional_params
from .values import (
    NOT_TENSOR,
    OUTER,
    Choice,
    Const,
    DictVal,
    Func,
    Grad,
    Klass,
    Module,
    Namespace,
    Partial,
    Super,
    Sym,
    Val,
    Value,
    collapse,
    fresh_id,
    fresh_storage,
    is_container,
    options_of,
    tensors_in,
)

if TYPE_CHECKING:
    from ..diagnostics import Span
    from .protocols import Interpreter

_BUILTINS = frozenset(dir(builtins))
_NAMESPACES = frozenset(
    {"torch", "torch.nn", "torch.nn.functional", "torch.optim", "torch.optim.lr_scheduler", "torch.linalg", "torch.fft",
     "torch.special", "torch.autograd", "torch.nn.init", "torch.nn.utils", "torch.cuda", "torch.cuda.amp", "torch.amp",
     "torch.distributed", "torch.utils", "torch.utils.data", "torch.utils.checkpoint", "torch.jit", "torch.backends",
     "torch.nn.modules", "torch.testing", "torch.distributions", "torch.nn.parallel", "functools", "itertools", "collections",
     "types", "argparse"}
)  # fmt: skip
_CONTAINER_BASES = frozenset({"Sequential", "ModuleList", "ModuleDict"})
# Libraries whose names the interpreter knows the meaning of (torch's from the generated tables).
_LIBRARIES = ("torch", "functools", "itertools", "collections", "types", "argparse")
# How many instances of a class differing only in numbers are built before the next such one
# reuses the last (`Engine.similar`).
MAX_CONTEXTS = 8
# How many times a function may be on the call stack below its first run: a recursive call is
# followed once (a recursive walk over a known structure), then its result is not known.
MAX_RECURSION = 1
T = TypeVar("T")
# What of a run's arguments its memo key holds: each name with its `_abstract` value.
_Abstracted = tuple[tuple[str, object], ...]


class Engine:
    def __init__(self, project: Project) -> None:
        self.project = project
        self.built: set[ClassInfo] = set()  # the classes instantiated during this analysis
        # One set per run or construction under way, collecting the classes instantiated below it.
        self._building: list[set[ClassInfo]] = []
        self.reached: list[Summary] = []  # the runs the entry points reached
        self.picked: list[tuple[Condition, Summary]] = []  # runs of a forward picked in `__init__`, under the pick
        self._evaluating: set[tuple[str, str]] = set()
        self._top_levels: set[str] = set()  # the files whose top level is being run (`module_run`)
        self._active: dict[int, int] = {}  # id(FunctionDef) -> its runs now on the call stack
        # An object with the networks a method assigned (`CallEvaluator.as_assigned`), one per
        # object and assignments, so that the runs it is handed to stay one memo entry.
        self.assigned_objects: dict[object, tuple[Module, object]] = {}

    # ----------------------------------------------------------------- names

    def grad_enabled(self, ctx: FileContext, node: cst.FunctionDef, cls: ClassInfo | None) -> bool:
        return function_grad_enabled(node, cls, ctx.imports)

    def global_value(self, ctx: FileContext, name: str) -> Value:
        value = self.bound_value(ctx, name)
        if (
            isinstance(value, Module)
            and value.instance is not None
            and (name in ctx.mutated or self.project.registering(ctx, name))
        ):
            return self.module_run(ctx).get(name, value)
        return value

    def module_run(self, ctx: FileContext) -> dict[str, Value]:
        """The project objects the module's top level changes, as it leaves them: a registry
        filled by a loop of `register_module` calls or by the class decorators of the files
        that import it, read by the file's `build_*` functions. Run once per file; while it
        runs, the names hold what they were bound to."""
        here = key_of(ctx.path)
        if here in self._top_levels:
            return {}
        self._top_levels.add(here)
        try:
            return self.project.learn(
                ("module run", here, id(ctx.module)), lambda: self.run_top_level(ctx), lambda _: {here}
            )
        finally:
            self._top_levels.discard(here)

    def run_top_level(self, ctx: FileContext) -> dict[str, Value]:
        interp = FunctionInterpreter(self, ctx, constructing=True, depth=MAX_CALL_DEPTH - 2)
        final = interp.run_statements(_top_level_code(ctx))
        values = {name: final.env[name] for name in ctx.mutated if name in final.env}
        for name in ctx.assignments:
            for other in self.project.registering(ctx, name):
                state = State(env={name: values.get(name, final.env.get(name, NOT_TENSOR))})
                registrar = FunctionInterpreter(self, other, constructing=True, depth=MAX_CALL_DEPTH - 2)
                registered = _registrations(other, name)
                values[name] = registrar.run_statements(registered, state).env[name]
        return values

    def bound_value(self, ctx: FileContext, name: str) -> Value:
        """What a module-level name is bound to: a class, a function, its one assignment, an import."""
        if name in ctx.classes:
            return Klass(name, ref=ctx.classes[name])
        if name in ctx.functions:
            return Func(name, ref=FunctionRef(ctx.path, ctx.functions[name]))
        # Bound after any import of it; while that binding is evaluated, the name is still the
        # import (`model = model.RNNModel(...)`).
        if name in ctx.assignments and (ctx.path, name) not in self._evaluating:
            return self.module_level(ctx, name)
        qualname = ctx.imports.aliases.get(name)
        if qualname is not None and qualname.split(".")[0] in _LIBRARIES:
            return self.torch_value(_canonical(ctx, name))
        if name in ctx.imports.relative or qualname is not None:
            return self.imported(ctx, name)
        if name in ctx.assignments:
            return NOT_TENSOR  # read while its own value is evaluated
        if ctx.imports.stars and self.project.resolve_name(ctx, name) is not None:
            return self.imported(ctx, name)  # `from GNN import *`
        if name in _BUILTINS:
            return Func(name, qualname=f"builtins.{name}")
        return NOT_TENSOR

    def imported(self, ctx: FileContext, name: str) -> Value:
        found = self.project.resolve_name(ctx, name)
        if found is not None:
            other, short = found
            return self.global_value(other, short) if short != name or other is not ctx else NOT_TENSOR
        module = self.project.module_file(ctx, name)
        if module is not None:
            return Namespace(path=module.path)
        return NOT_TENSOR

    def module_level(self, ctx: FileContext, name: str) -> Value:
        """A module-level name read by a function: its last top-level value, evaluated once."""
        key = ("global", key_of(ctx.path), name, id(ctx.module))
        if (ctx.path, name) in self._evaluating:  # not in the memo while it is being evaluated
            return NOT_TENSOR
        self._evaluating.add((ctx.path, name))
        try:
            return self.project.learn(
                key, lambda: self.evaluate_once(ctx, ctx.assignments[name]), lambda _: {key_of(ctx.path)}
            )
        finally:
            self._evaluating.discard((ctx.path, name))

    def evaluate_once(self, ctx: FileContext, expr: cst.BaseExpression) -> Value:
        """An expression Python evaluates once, when the module or the `def` runs: a module-level
        value, a default, a class attribute."""
        return FunctionInterpreter(self, ctx, constructing=True, depth=MAX_CALL_DEPTH - 2).eval(expr, State())

    def torch_value(self, qualname: str) -> Value:
        if qualname in _NAMESPACES:
            return Namespace(qualname)
        short = qualname.rsplit(".", 1)[-1]
        namespace = qualname[: -len(short) - 1]
        if qualname in (
            "torch.nn.Parameter",
            "torch.Tensor",
            "functools.partial",
            "types.SimpleNamespace",
            "argparse.Namespace",
        ):
            return Klass(short, qualname)
        if namespace in ("torch.nn", "torch.optim") and short[:1].isupper():
            return Klass(short, qualname)
        if namespace == "torch.nn.modules" or namespace.startswith("torch.nn.modules."):
            return self.torch_value(f"torch.nn.{short}")
        return Func(short, qualname=qualname)

    def namespace_member(self, namespace: Value, attr: str) -> Value:
        assert isinstance(namespace, Namespace)
        if namespace.qualname is not None:
            return self.torch_value(f"{namespace.qualname}.{attr}")
        other = self.project.file(Path(namespace.path)) if namespace.path is not None else None
        return self.global_value(other, attr) if other is not None else NOT_TENSOR

    def class_member(self, info: ClassInfo, attr: str, bound: Module | None) -> Value:
        method = self.method_of(info, attr)
        if method is not None:
            return Func(attr, ref=method, bound=None if method.is_static else bound)
        owners = self.mro(info)
        return self.project.learn(
            ("class attribute", id(info), key_of(info.path), attr),
            lambda: self.class_attribute(owners, attr),
            lambda _: (key_of(owner.path) for owner in owners),
        )

    def class_attribute(self, owners: list[ClassInfo], attr: str) -> Value:
        """`attr` as the first class among `owners` that assigns it has it (`expansion = 4`):
        what the module assigns to it after the class (`Extractor.handle_class = Handle`), else
        its body's."""
        for owner in owners:
            ctx = self.project.class_file(owner)
            patched = ctx.class_assignments.get((owner.name, attr)) if ctx is not None else None
            if ctx is not None and patched is not None and ctx.classes.get(owner.name) is owner:
                return self.evaluate_once(ctx, patched)
            for statement in owner.node.body.body if isinstance(owner.node.body, cst.IndentedBlock) else ():
                if isinstance(statement, cst.SimpleStatementLine):
                    for small in statement.body:
                        if isinstance(small, cst.Assign) and any(
                            isinstance(t.target, cst.Name) and t.target.value == attr for t in small.targets
                        ):
                            if ctx is not None:
                                return self.evaluate_once(ctx, small.value)
        return NOT_TENSOR

    def mro(self, info: ClassInfo) -> list[ClassInfo]:
        """The project classes `info` inherits from, itself first (depth first, as written)."""
        return self.project.learn(
            ("mro", id(info), key_of(info.path)),
            lambda: self.find_mro(info),
            lambda owners: (key_of(owner.path) for owner in owners),
        )

    def find_mro(self, info: ClassInfo) -> list[ClassInfo]:
        order: list[ClassInfo] = []
        todo = [info]
        while todo and len(order) < 32:
            current = todo.pop(0)
            if current in order:
                continue
            order.append(current)
            ctx = self.project.class_file(current)
            if ctx is None:
                continue
            for base in current.bases:
                if base.startswith("torch."):
                    continue
                found = self.project.resolve_class(ctx, base)
                if found is not None:
                    todo.append(found)
        return order

    def method_of(self, info: ClassInfo, name: str) -> FunctionRef | None:
        for owner in self.mro(info):
            node = owner.methods.get(name)
            if node is not None:
                return FunctionRef(owner.path, node, owner)
        return None

    def torch_base(self, info: ClassInfo) -> str | None:
        """The torch.nn class a project class builds on, through its project bases."""
        for owner in self.mro(info):
            for base in owner.torch_bases():
                kind = base[len("torch.nn.") :]
                if kind != "Module":
                    return kind
        return None

    def is_module(self, info: ClassInfo) -> bool:
        """Subclasses torch.nn.Module, directly or through project classes (whatever its name)."""
        return any(owner.torch_bases() for owner in self.mro(info))

    def subclass_of(self, info: ClassInfo, base: ClassInfo) -> bool:
        """By file and name, not identity: a file read again after its tree was forgotten
        defines the same classes anew."""
        wanted = (key_of(base.path), base.name)
        return any((key_of(owner.path), owner.name) == wanted for owner in self.mro(info))

    def super_of(self, interp: Interpreter) -> Value:
        """`super()` inside a method: the rest of the class's bases, bound to the same `self`."""
        return Super(interp.cls) if interp.cls is not None else NOT_TENSOR

    def locate(self, node: cst.CSTNode | None, prefer: str) -> tuple[str, Span] | None:
        """Where a node lies: in `prefer`'s tree, else in another file the run still holds."""
        if node is None:
            return None
        first = self.project.file(Path(prefer))
        contexts = [first] + [ctx for ctx in self.project.contexts() if ctx is not first]
        for ctx in contexts:
            if ctx is None:
                continue
            try:
                return ctx.path, ctx.span_of(node)
            except KeyError:
                continue
        return self._relocated(node)

    def _relocated(self, node: cst.CSTNode) -> tuple[str, Span] | None:
        """A node of a tree the run has forgotten since (a caller file evicted while its run went
        on, then read again as a new tree): the same code in the files this check read, as they
        are held now. Only where the bounds on kept trees are smaller than a check's working set;
        the first equal node of a file is taken."""
        kind = type(node)
        for key in sorted(self.project.dependencies):
            ctx = self.project.file(Path(key))
            if ctx is None:
                continue
            for candidate in descendants(ctx.module):
                if type(candidate) is kind and candidate.deep_equals(node):
                    return ctx.path, ctx.span_of(candidate)
        return None

    def span_of(self, path: str) -> Callable[[cst.CSTNode], Span]:
        ctx = self.project.file(Path(path))
        if ctx is None:
            raise KeyError(path)
        return ctx.span_of

    # ----------------------------------------------------------------- runs

    def run(
        self,
        interp: Interpreter,
        ref: FunctionRef,
        args: Args,
        bound: Value | None,
        state: State,
        call_site: bool = True,
        closure: tuple[tuple[str, Value], ...] = (),
    ) -> tuple[Summary, Binding] | None:
        if interp.depth >= MAX_CALL_DEPTH:
            return None
        ctx = interp.ctx if key_of(ref.path) == key_of(interp.ctx.path) else self.project.file(Path(ref.path))
        if ctx is None:
            return None
        skip = 0 if ref.is_static or (ref.cls is None and bound is None) else 1
        binding = bind(ref.node, args, skip)
        if isinstance(bound, Module) and bound.renamed and bound.instance is not None:
            bound = replace(bound, params=bound.instance.params, renamed=())  # runs on the instance's own
        if skip:
            first = positional_params(ref.node)[:1]
            if first:
                binding.values = {first[0].name.value: bound if bound is not None else NOT_TENSOR, **binding.values}
                binding.exprs = {first[0].name.value: None, **binding.exprs}
        self.complete(ctx, binding, call_site)
        binding.in_declared_order(ref.node)
        if ref.cls is None and bound is None:
            self.enclose(ctx, interp.ctx, ref.node, binding, state, closure)
        constructing = interp.constructing and bound is not None and bound is state.env.get("self")
        instance = bound.instance if isinstance(bound, Module) else None
        key = None
        if not constructing:
            key = (
                "run",
                key_of(ref.path),
                id(ref.node),
                id(instance) if instance is not None else None,
                _abstract_all(binding.values),
                interp.grad_enabled,
                state.hooked,
                call_site,
            )
            known = self.project.recall(key)
            if isinstance(known, Summary):
                self.note_built(known.classes)  # they are built, whether this run built them or an earlier one
                return known, binding
        if self._active.get(id(ref.node), 0) > MAX_RECURSION:
            return None  # `unwrap(model.module)` recursing on unknown attributes: each level is a new context
        self_env = (
            {name: value for name, value in state.env.items() if name.startswith("self.")} if constructing else {}
        )
        self._active[id(ref.node)] = self._active.get(id(ref.node), 0) + 1
        try:
            with self.collecting_built() as built_below, self.project.reading() as read:
                summary = self.execute(
                    ctx,
                    ref,
                    binding,
                    instance,
                    constructing,
                    interp.depth + 1,
                    interp.grad_enabled,
                    self_env,
                    state.hooked,
                    call_site,
                )
        finally:
            self._active[id(ref.node)] -= 1
        summary.classes = frozenset(built_below)
        summary.files = shared(summary.files | read | _files_held([bound, *binding.values.values()]))
        if key is not None:
            self.project.remember(key, summary, summary.files)
        return summary, binding

    def enclose(
        self,
        ctx: FileContext,
        calling: FileContext,
        node: cst.FunctionDef,
        binding: Binding,
        state: State,
        closure: tuple[tuple[str, Value], ...],
    ) -> None:
        """The variables of other scopes a function uses are passed as if they were arguments, so
        that a list or dict it fills is filled for its caller too: a nested function reads its
        enclosing function's (those the calling scope holds; the lists and dicts it fills as
        they were where it was defined, a hook running inside the model), and any function the
        module-level lists and dicts it fills (`activation[name] = output` in a hook). One
        filled away from its owner is held under `OUTER` and handed back up to it
        (`Summary.outer`)."""
        nested = ctx.functions.get(node.name.value) is not node
        here = key_of(ctx.path) == key_of(calling.path)
        enclosed = dict(closure)
        for name in sorted(ctx.words(node.body).names if nested else ctx.filled(node)):
            if name in binding.values:
                continue
            if _other_object(enclosed.get(name), state.env.get(name)):
                # the object a hook a method made closes over (`self.activations[name] = output`),
                # called inside the model, where `self` is the model
                binding.values[name], binding.exprs[name] = enclosed[name], None
            elif here and name in state.env and (nested or is_container(state.env[name])):
                binding.values[name], binding.exprs[name] = state.env[name], cst.Name(name)
            elif name in enclosed or (name in ctx.assignments and name in ctx.filled(node)):
                value = enclosed[name] if name in enclosed else self.global_value(ctx, name)
                if is_container(value):
                    outer = state.env.get(OUTER + name, value)  # filled already by an earlier call
                    binding.values[name], binding.exprs[name] = outer, cst.Name(OUTER + name)
                elif name in enclosed:  # an object or constant of the defining scope
                    binding.values[name], binding.exprs[name] = value, None

    def note_built(self, classes: frozenset[ClassInfo]) -> None:
        """Classes instantiated here, directly or by a run or construction taken from the memo:
        their `forward` is not an entry (it runs with what builds them). A memo hit that did not
        say so made a file's findings depend on what the process had analysed before (a
        `forward` run on its defaults because the construction that builds it was a hit)."""
        self.built |= classes
        for building in self._building:
            building |= classes

    @contextmanager
    def collecting_built(self) -> Iterator[set[ClassInfo]]:
        """The classes instantiated while the block runs, nested ones included."""
        self._building.append(set())
        try:
            yield self._building[-1]
        finally:
            self._building.pop()

    def complete(self, ctx: FileContext, binding: Binding, call_site: bool = True) -> None:
        """Parameters a call site leaves out take their defaults, which is what that call runs
        with (`_convert(boxes, fmt)` runs with `inplace=False`). Without a call site (the
        instance of a class nobody known builds) they stay configuration values that know
        their defaults: whoever builds it may choose otherwise."""
        for param in binding.missing:
            value = self.default(ctx, param)
            if call_site and isinstance(value, Sym) and value.default is not None:
                value = value.default
            binding.values[param.name.value] = value
            binding.exprs[param.name.value] = None

    def default(self, ctx: FileContext, param: cst.Param) -> Value:
        """A parameter's default as a configuration value: a constant default is a `Sym` that
        knows it; anything else is the value it evaluates to."""
        name, default = param.name.value, param.default
        if default is None:
            return Sym(name)
        key = ("default", key_of(ctx.path), id(param))  # evaluated once, as Python does
        return self.project.learn(
            key, lambda: _configuration(name, self.evaluate_once(ctx, default)), lambda _: {key_of(ctx.path)}
        )

    def execute(
        self,
        ctx: FileContext,
        ref: FunctionRef,
        binding: Binding,
        instance: Instance | None,
        constructing: bool,
        depth: int,
        grad_enabled: bool,
        self_env: dict[str, Value],
        hooked: ModuleHooks,
        call_site: bool = True,
    ) -> Summary:
        ref = ctx.current(ref)
        tokens = tuple(next_order() for _ in binding.values)
        params = {
            name: _fresh(value, frozenset({token}))
            for (name, value), token in zip(binding.values.items(), tokens, strict=True)
        }
        recorder = SummaryRecorder(params)
        recorder.summary.arg_tokens = tokens
        child = FunctionInterpreter(self, ctx, ref.cls, instance, recorder, constructing, depth, grad_enabled)
        child.hooked = hooked
        final = child.run_function(ref, {**params, **self_env}, params)
        # What it saved of its object's parameters, and of the modules it was handed
        # (`do_learning_fix_step(model, ...)` returning a loss through `model`): the caller's own.
        stable = frozenset().union(
            instance.owned if instance is not None else frozenset(),
            *(
                option.params
                for value in params.values()
                for _, option in options_of(value)
                if isinstance(option, Module)
            ),
        )
        summary = recorder.finish(final, child.returned, stable)
        summary.node = ref.node
        summary.path = key_of(ref.path)
        summary.patches = child.patches
        summary.hooked = final.hooked - hooked
        summary.outer = {
            name: (value, final.stale.get(name)) for name, value in final.env.items() if name.startswith(OUTER)
        }
        summary.blind = child.blind
        summary.blind_writes = child.blind_writes
        summary.hookable = child.hookable
        summary.mutations = child.mutations(returned_escapes=not call_site)
        summary.deferred = child.deferred() if call_site else []
        summary.children = child.children
        summary.files = shared(frozenset({key_of(ref.path)}).union(*(c.files for c in child.children)))
        summary.builds_inplace = _builds_inplace(child.returned) or any(
            _builds_inplace(v) for v in summary.self_updates.values()
        )
        return summary

    def similar(self, info: ClassInfo, coarse: _Abstracted) -> Instance | None:
        """An instance already built with arguments that differ from these only in numbers,
        once MAX_CONTEXTS such instances have been built: model zoos build one class with a
        hundred sets of depths, widths and rates (timm's `ResNet` through its factories), and
        each would otherwise be interpreted anew. Everything else stays apart: booleans and None
        switch in-place paths on and off, strings name layers (`act_layer="relu"`)."""
        # The memo holds every kind of value; under a "similar" key, a count and an instance.
        seen = cast(
            "tuple[int, Instance] | None", self.project.recall(("similar", id(info), key_of(info.path), coarse))
        )
        return seen[1] if seen is not None and seen[0] >= MAX_CONTEXTS else None

    def count_similar(self, info: ClassInfo, coarse: _Abstracted, instance: Instance, files: frozenset[str]) -> None:
        key = ("similar", id(info), key_of(info.path), coarse)
        seen = cast("tuple[int, Instance] | None", self.project.memo.get(key))
        self.project.remember(key, (seen[0] + 1 if seen is not None else 1, instance), files)

    # ----------------------------------------------------------------- instances

    def instantiate(
        self, interp: Interpreter, info: ClassInfo, call: cst.Call | None, args: Args, state: State
    ) -> Value:
        self.note_built(frozenset({info}))
        init = self.method_of(info, "__init__")
        ctx = self.project.class_file(info)
        if ctx is None:
            return NOT_TENSOR
        if init is None:
            binding = Binding({"args": Val(items=tuple(args.values()))}, {}, [])
            key = ("instance", id(info), key_of(info.path), _abstract_all(binding.values))
        else:
            init_ctx = self.project.file(Path(init.path)) if key_of(init.path) != key_of(ctx.path) else ctx
            binding = bind(init.node, args, 1)
            self.complete(init_ctx or ctx, binding, call_site=call is not None)
            binding.in_declared_order(init.node)
            key = ("instance", id(info), key_of(info.path), _abstract_all(binding.values))
        coarse = _abstract_all(binding.values, coarse=True)
        instance = self.project.recall(key) or self.similar(info, coarse)
        if instance is None:
            if interp.depth >= MAX_CALL_DEPTH:
                return Module(None, info.name, origin=call)
            with self.collecting_built() as built_below, self.project.reading() as read:
                instance = self.build(interp, info, init, binding, call, args, state)
            instance.classes = frozenset(built_below | {info})
            built = instance.built.files if instance.built is not None else frozenset()
            files = shared(built | read | _files_held(binding.values.values()) | {key_of(info.path)})
            self.project.remember(key, instance, files)
            self.count_similar(info, coarse, instance, files)
        assert isinstance(instance, Instance)
        self.note_built(instance.classes)
        if instance.built is not None:
            interp.children.append(instance.built)
            state.hooked |= instance.built.hooked
        kind = None
        if instance.container is not None and self.method_of(info, "forward") is None:
            kind = instance.container.kind
        # A container's items run as they are, on the instance's storages; a class with methods
        # runs through its summaries, which `Module.own_storages` translates.
        renamed = () if kind is not None else tuple((storage, fresh_id()) for storage in sorted(instance.owned))
        module = Module(
            kind,
            info.name,
            items=instance.container.items if kind is not None and instance.container is not None else None,
            instance=instance,
            params=frozenset(new for old, new in renamed if old in instance.params) if renamed else instance.params,
            renamed=renamed,
            config=_passed_fields(init, binding) if init is not None else (),
            origin=call,
        )
        if init is not None and call is not None and instance.built is not None and instance.built.writes:
            # `__init__` writing a tensor it was handed (moving boxes' origin in place): the
            # caller's tensor, like any callee's write.
            full = Binding({"self": module, **binding.values}, {"self": None, **binding.exprs}, [])
            interp.calls.apply_summary(instance.built, full, init, call, args, state, None, True)
        return module

    def build(
        self,
        interp: Interpreter,
        info: ClassInfo,
        init: FunctionRef | None,
        binding: Binding,
        call: cst.Call | None,
        args: Args,
        state: State,
    ) -> Instance:
        instance = Instance(info, label=info.name)
        base = self.torch_base(info)
        if init is None:
            if base is not None:
                instance.container = (
                    interp.calls.modules.construct(base, call, args, state)
                    if base in _CONTAINER_BASES or base in interp.facts.module_saves
                    else None
                )
            return instance
        self_value = Module(None, info.name, instance=instance, params=fresh_storage())
        ctx = self.project.file(Path(init.path)) or interp.ctx
        first = positional_params(init.node)[:1]
        full = Binding({**({first[0].name.value: self_value} if first else {}), **binding.values}, {}, [])
        summary = self.execute(ctx, init, full, instance, True, interp.depth + 1, True, {}, state.hooked)
        final = dict(summary.self_updates)
        container = final.pop("__container__", None)
        instance.attrs = {name: patched(value, summary.patches) for name, value in final.items()}
        if isinstance(container, Module):
            instance.container = container
        instance.built = summary
        return instance

    # ----------------------------------------------------------------- entry points

    def analyze(self, ctx: FileContext, reaching: frozenset[str] | None = None) -> list[Mutation]:
        """The findings of the file's entry points. Given `reaching` (the names a caller file
        binds to the file being checked), only the entries whose code can reach that file: its
        top-level code, and the classes and functions that mention those names, directly or
        through the file's module-level assignments (`blocks = {"basic": BasicBlock}`). A model
        zoo's other entries (a hundred factory functions of its own) cannot add a finding there."""
        found: list[Mutation] = []
        top = FunctionInterpreter(self, ctx)
        if _guarded(top.run_statements, _top_level_code(ctx)) is not None:
            found.extend(top.mutations())
        self.reached.extend(top.children)
        wanted = _mentioning(ctx, reaching) if reaching is not None else None
        for info in reversed(list(ctx.class_nodes.values())):
            if info.is_autograd_function or (wanted is not None and not wanted(info.node)):
                continue
            forward = next(
                (
                    ref
                    for name in ("forward", "__call__")
                    if (ref := self.method_of(info, name)) is not None and key_of(ref.path) == key_of(ctx.path)
                ),
                None,
            )
            if forward is not None and info not in self.built:
                self.reached.extend(_guarded(self.forward_entry, ctx, forward, info) or [])
            elif forward is None and self.is_module(info):
                _guarded(self.run_picked_forward, ctx, info)
        ran = _nodes(self.reached) | _nodes([summary for _, summary in self.picked])
        called = _called_by_siblings(ctx)
        order = sorted(ctx.bodies, key=lambda body: (self.grad_enabled(ctx, *body), id(body[0]) in called))
        for node, cls in order:
            # One an earlier entry reached (under its no_grad) is not run again: no_grad code
            # (an optimizer's `step`) runs first, so that the helpers it calls, wherever they are
            # defined, run there. A method its class's other methods call comes last: it runs
            # through them, under their conditions (esm's `_inference_forward`, which `forward`
            # calls when `inplace_safe`); one they did not reach holds only if something calls it
            # otherwise, and says so.
            if id(node) in ran or (wanted is not None and not wanted(node) and not _holds_reaching(cls, wanted)):
                continue
            if cls is None and reaching is None and builds_only(ctx, node):
                continue  # a model zoo's factory: what it builds is analysed on its own
            ref = FunctionRef(ctx.path, node, cls)
            runs = _guarded(self.entry_run, ctx, ref, self.method_receiver(ctx, cls, node)) or []
            if id(node) in called:
                self.picked.extend(
                    (frozenset({Assumption(REACHED, node.name.value, True, against_default=True)}), run) for run in runs
                )
            else:
                self.reached.extend(runs)
            ran |= _nodes(runs)
        for summary in _all(self.reached):
            found.extend(summary.mutations)
        for condition, picked in self.picked:
            found.extend(
                replace(mutation, condition=mutation.condition | condition)
                for summary in _all([picked])
                for mutation in summary.mutations
            )
        return found

    def forward_entry(self, ctx: FileContext, forward: FunctionRef, info: ClassInfo) -> list[Summary]:
        """The `forward` of a class nobody in the file builds, on the instance its defaults build."""
        return self.entry_run(ctx, forward, self.entry_instance(ctx, info))

    def run_picked_forward(self, ctx: FileContext, info: ClassInfo) -> None:
        """A module whose `__init__` picks its forward by configuration (timm's `Partial_conv3`:
        `self.forward = self.forward_slicing` when `forward == 'slicing'`): each method it may
        pick runs on the instance, and what it finds holds under that pick's condition."""
        module = self.entry_instance(ctx, info)
        chosen = module.instance.attrs.get("forward") if module.instance is not None else None
        for condition, option in options_of(chosen) if chosen is not None else ():
            if isinstance(option, Func) and option.ref is not None and key_of(option.ref.path) == key_of(ctx.path):
                self.picked.extend((condition, summary) for summary in self.entry_run(ctx, option.ref, module))

    def needs_callers(self, ctx: FileContext) -> bool:
        """A function of the file writes its argument, builds an in-place module, makes a
        finding only its callers can prove (its argument's grad is not known here), uses an
        argument nobody here passes, or writes in place where a caller's module backward hook
        would forbid it: whether that breaks anything depends on its callers. (So does a step of
        an optimizer it does not know: `steps_unknown`.)"""
        mine = self.runs_of(ctx)
        return any(
            summary.writes_arguments
            or summary.builds_inplace
            or summary.blind
            or any(not m.certain for m in summary.mutations)
            for summary in mine
        ) or (any(summary.hookable for summary in mine) and self.project.hooks_modules(ctx))

    def steps_unknown(self, ctx: FileContext) -> bool:
        """A run of the file steps an optimizer whose parameters it does not know, in a file that
        takes `state_dict()` snapshots or copies modules: a trainer's `self.optimizer`, set to
        None by `__init__` and built by a method its script calls first
        (`con.set_train_model(TransE)`, then `con.train()`); an optimizer over
        `copy.copy(self.pred_model)`, the model the script gave. (Reading callers for every
        unknown step cost timm 10%.)"""
        return any(
            isinstance(event, Step) and event.storages is None
            for summary in self.runs_of(ctx)
            for event in summary.training
        ) and bool({"state_dict", "copy"} & ctx.words(ctx.module).names)

    def writes_arguments(self, ctx: FileContext, through: str | None = None) -> bool:
        """A function of the file writes its arguments, or ones nobody here passes (`through`:
        with that file's code, a caller file handing on the checked file's write): their owner
        is its callers'."""
        return any(summary.writes_arguments or summary.blind_writes for summary in self.runs_of(ctx, through))

    def hands_on(self, ctx: FileContext, through: str) -> bool:
        """A caller file's runs with the checked file's code write their arguments, or use
        arguments nobody passed (CosyVoice's flow model, built by the script that builds the
        caller), or hand one to the checked file's code that writes it (a transform's `__call__`
        passing its `tensor` to `F.normalize`): what they are given decides."""
        return any(
            summary.writes_arguments
            or summary.blind
            or any(child.blind_writes and child.path == through for child in summary.children)
            for summary in self.runs_of(ctx, through)
        )

    def runs_of(self, ctx: FileContext, through: str | None = None) -> list[Summary]:
        here = key_of(ctx.path)
        return [
            summary
            for summary in _all(self.reached)
            if summary.path == here and (through is None or through in summary.files)
        ]

    def method_receiver(self, ctx: FileContext, cls: ClassInfo | None, node: cst.FunctionDef) -> Value | None:
        if cls is None or cls.is_autograd_function or _is_static(node):
            return None
        return self.entry_instance(ctx, cls)

    def entry_instance(self, ctx: FileContext, info: ClassInfo) -> Module:
        """The instance a class's own methods run on when nobody known builds it: its defaults."""
        interp = FunctionInterpreter(self, ctx)
        value = self.instantiate(interp, info, None, Args(), State())
        self.reached.extend(interp.children)
        return value if isinstance(value, Module) else Module(None, info.name)

    def entry_run(self, ctx: FileContext, ref: FunctionRef, bound: Value | None) -> list[Summary]:
        interp = FunctionInterpreter(self, ctx)
        args = self.with_varargs(ref, self.entry_arguments(ctx, ref))
        run = self.run(
            interp, ref, args, bound, State(), call_site=False
        )  # nobody known calls it: its options stay open
        return [run[0]] if run is not None else []

    def with_varargs(self, ref: FunctionRef, keywords: dict[str, Value]) -> Args:
        """A `forward(self, *xs)` nobody known calls is given activations in its varargs, two
        tensors of their own (MiDaS's fusion block reads `xs[0]` and `xs[1]`): its declared
        parameters are then passed by position, where each holds an activation already."""
        node, cls = ref.node, ref.cls
        star = node.params.star_arg
        if not isinstance(star, cst.Param) or cls is None or not is_entry(node, cls, self.is_module(cls)):
            return Args(keywords=keywords)
        declared = [param.name.value for param in positional_params(node)][1:]
        if any(name not in keywords for name in declared) or star.annotation is not None:
            return Args(keywords=keywords)
        rest = {name: value for name, value in keywords.items() if name not in declared}
        positional = [keywords[name] for name in declared]
        positional += [Val(fresh_storage(), Grad.MAYBE, origin=node) for _ in range(2)]
        return Args(positional, [None] * len(positional), rest)

    def entry_arguments(self, ctx: FileContext, ref: FunctionRef) -> dict[str, Value]:
        """What a function's parameters hold when no caller is known: a `forward`'s arguments are
        activations (an optional one is None or a tensor), annotated tensors are tensors of
        unknown provenance, the rest configuration values with their defaults."""
        node, cls = ref.node, ref.cls
        is_module = cls is not None and self.is_module(cls)
        tensors = tensor_parameters(node, cls, is_module)
        entry = is_entry(node, cls, is_module)
        lists = set(tensor_list_parameters(node, entry))
        params = named_params(node)
        if cls is not None and params and not (_is_static(node) and node.name.value not in ("forward", "backward")):
            params = params[1:]
        values: dict[str, Value] = {}
        for param in params:
            name = param.name.value
            if name in lists:
                grad = Grad.MAYBE if entry else Grad.UNKNOWN
                values[name] = Val(items=(Val(fresh_storage(), grad, origin=node),))
            elif entry and _defaults_to_none(param) and (name in tensors or not annotation_text(param.annotation)):
                # `target_embedding: Tensor | None = None`: set or not, and the finding says which
                given = Assumption(f"{name}", "is None", False)
                values[name] = Choice(
                    (
                        (frozenset({given.negated()}), Const(None)),
                        (frozenset({given}), Val(fresh_storage(), Grad.MAYBE, origin=node)),
                    )
                )
            elif name in tensors:
                values[name] = Val(fresh_storage(), tensors[name], origin=node)
            else:
                continue  # its default, or a configuration value nobody passed
        return values


def _top_level_code(ctx: FileContext) -> list[cst.BaseStatement]:
    """The statements a module runs at import, less its definitions (run as entries of their
    own), but with the registrations its decorators make (`@NECKS.register_module()`)."""
    code: list[cst.BaseStatement] = []
    for statement in ctx.module.body:
        if not isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            code.append(statement)
        else:
            code.extend(line for _, line in ctx.registrations.get(id(statement), ()))
    return code


def _registrations(ctx: FileContext, receiver: str) -> list[cst.BaseStatement]:
    """The decorators of the file that are methods of `receiver`, applied."""
    return [line for applied in ctx.registrations.values() for name, line in applied if name == receiver]


def _mentioning(ctx: FileContext, names: frozenset[str]) -> Callable[[cst.CSTNode], bool]:
    """Whether a definition's code mentions one of `names`, or a module-level name assigned
    from one of them (`blocks = {"basic": BasicBlock}`). A module-level function that does more
    than build also reaches them through the functions it calls that do (a test calling the
    helper that runs the model); a model zoo's hundred factories are not reached through the
    one helper they all call. Such a function also reaches them through the file's own classes
    that do (a script's `main()` training the `Trainer` that builds the checked file's model)."""
    values = _reach(ctx, set(names), dict(ctx.assignments))
    classes = _reach(ctx, values, {name: info.node for name, info in ctx.classes.items()})
    functions = _reach(
        ctx,
        classes,
        {name: node for name, node in ctx.functions.items() if not builds_only(ctx, node)},
    )

    def wanted(node: cst.CSTNode) -> bool:
        runs_more = (
            isinstance(node, cst.FunctionDef)
            and ctx.functions.get(node.name.value) is node
            and not builds_only(ctx, node)
        )
        return bool(ctx.words(node).all & (functions if runs_more else values))

    return wanted


def _holds_reaching(cls: ClassInfo | None, wanted: Callable[[cst.CSTNode], bool]) -> bool:
    """A class whose `__init__` builds what the names give (`self.normalize_img = Normalize(...)`):
    each of its methods may use it (the dataset's `__getitem__` normalising in place)."""
    init = cls.methods.get("__init__") if cls is not None else None
    return init is not None and wanted(init)


def _reach(ctx: FileContext, reach: set[str], definitions: dict[str, cst.CSTNode]) -> set[str]:
    """`reach` grown by the module-level definitions whose code uses a name in it, to a fixpoint."""
    used = {name: ctx.words(node).all for name, node in definitions.items()}
    reach = set(reach)
    while grown := {name for name, words in used.items() if name not in reach and words & reach}:
        reach |= grown
    return reach


def _called_by_siblings(ctx: FileContext) -> set[int]:
    """The methods (ids of their nodes) that another method of their class names in its code,
    not in a string (`state['step']` in `__setstate__` does not call `step`)."""
    if ctx.called_by_siblings is None:
        ctx.called_by_siblings = _sibling_calls(ctx)
    return ctx.called_by_siblings


def _sibling_calls(ctx: FileContext) -> set[int]:
    methods: dict[int, list[cst.FunctionDef]] = {}
    for node, cls in ctx.bodies:
        if cls is not None:
            methods.setdefault(id(cls), []).append(node)
    called: set[int] = set()
    for siblings in methods.values():
        if len(siblings) < 2:
            continue
        names = {method.name.value for method in siblings}
        named = [ctx.words(method.body).names & names for method in siblings]
        called.update(
            id(node)
            for node in siblings
            if any(other is not node and node.name.value in used for other, used in zip(siblings, named, strict=True))
        )
    return called


def _nodes(summaries: list[Summary]) -> set[int]:
    return {id(summary.node) for summary in _all(summaries) if summary.node is not None}


def _guarded(run: Callable[..., T], *args: object) -> T | None:
    """Runs one entry point (None if it could not): a pathologically deep expression costs that
    entry its findings only."""
    try:
        return run(*args)
    except RecursionError:
        return None


def _all(summaries: list[Summary]) -> list[Summary]:
    """Every run reached, each once, in the order the analysis met them."""
    seen: dict[int, Summary] = {}
    todo = deque(summaries)
    while todo:
        summary = todo.popleft()
        if id(summary) in seen:
            continue
        seen[id(summary)] = summary
        todo.extend(summary.children)
    return list(seen.values())


def _fresh(value: Value, token: frozenset[int]) -> Value:
    """An argument as the callee sees it: the same abstract value, with storages of its own, and
    for graph only `token`, which what the callee computes from it carries along
    (`Summary.arg_tokens`)."""
    if isinstance(value, Val):
        items = tuple(_fresh(item, token) for item in value.items) if value.items is not None else None
        storages = fresh_storage() if value.is_tensor else frozenset()
        return replace(
            value,
            storages=storages,
            items=items,
            graph=token if value.is_tensor else frozenset(),
            cell=fresh_id() if value.cell is not None else None,
        )
    if isinstance(value, DictVal):
        return DictVal(
            tuple((key, _fresh(item, token)) for key, item in value.entries),
            _fresh(value.rest, token) if value.rest is not None else None,
            fresh_id() if value.cell is not None else None,
        )
    if isinstance(value, Choice):
        return Choice(tuple((condition, _fresh(option, token)) for condition, option in value.options))
    if isinstance(value, Module) and value.config:
        return replace(value, config=tuple((name, _fresh(item, token)) for name, item in value.config))
    return value


def _passed_fields(init: FunctionRef, binding: Binding) -> tuple[tuple[str, Value], ...]:
    """The tensors a dataclass was built with, as this site passed them: the memoised instance
    holds those of the first site that built one alike (`EncoderOutput(logits=h)` returned by
    each forward with its own `h`)."""
    if init.cls is None:
        return ()
    return tuple(
        (name, binding.values[name])
        for name in init.cls.fields
        if name in binding.values and tensors_in(binding.values[name])
    )


def _abstract(value: Value, coarse: bool = False) -> object:
    """What of an argument a run depends on: tensors by what autograd knows of them, not storage.
    `coarse` keeps of a number only its type."""
    if isinstance(value, Val):
        items = tuple(_abstract(item, coarse) for item in value.items) if value.items is not None else None
        if value.is_tensor:
            return (
                "T",
                value.grad,
                value.hidden,
                value.multi_view,
                value.hooked,
                value.inference,
                value.dtype,
                value.fresh_buffer,
                value.strided,
                value.expanded is not None,
                value.opaque,
                items,
            )
        return ("L", items, value.cell is not None)
    if isinstance(value, DictVal):
        return (
            "D",
            tuple((key, _abstract(item, coarse)) for key, item in value.entries),
            _abstract(value.rest, coarse) if value.rest is not None else None,
        )
    if isinstance(value, Choice):
        return ("X", tuple((condition, _abstract(option, coarse)) for condition, option in value.options))
    if isinstance(value, Const) and coarse and type(value.value) in (int, float):
        return ("C", type(value.value).__name__)
    if isinstance(value, Const):
        try:
            hash(value.value)
            return ("C", type(value.value).__name__, value.value)
        except TypeError:
            return ("C", repr(value.value))
    return value


def _configuration(name: str, value: Value) -> Value:
    """A parameter's evaluated default: a constant is a `Sym` that knows it."""
    return Sym(name, Const(value.value)) if isinstance(value, Const) else value


def _other_object(closed: Value | None, here: Value | None) -> bool:
    """Whether a function closed over a project object that the scope calling it names by the
    same name as another one."""
    return (
        isinstance(closed, Module)
        and closed.instance is not None
        and isinstance(here, Module)
        and here.ident != closed.ident
        and here.instance is not closed.instance
    )


def _files_held(values: Iterable[Value | None]) -> frozenset[str]:
    """The files whose syntax trees these values keep alive (a class, a function, a module
    built from a class): a memo entry made from them must be forgotten with those files, or it
    keeps the trees evicting them should free."""
    files: set[str] = set()
    stack = [value for value in values if value is not None]
    while stack:
        value = stack.pop()
        if isinstance(value, Klass) and value.ref is not None:
            files.add(key_of(value.ref.path))
        elif isinstance(value, Func):
            if value.ref is not None:
                files.add(key_of(value.ref.path))
            if value.bound is not None:
                stack.append(value.bound)
        elif isinstance(value, Module):
            if value.instance is not None:
                files.update(key_of(info.path) for info in value.instance.classes | {value.instance.cls})
            stack.extend(value.items or ())
        elif isinstance(value, Partial):
            stack.extend((value.target, *value.args, *(item for _, item in value.kwargs)))
        elif isinstance(value, Val):
            stack.extend(value.items or ())
        elif isinstance(value, DictVal):
            stack.extend(item for _, item in value.entries)
            if value.rest is not None:
                stack.append(value.rest)
        elif isinstance(value, Choice):
            stack.extend(option for _, option in value.options)
    return frozenset(files)


def _abstract_all(values: dict[str, Value], coarse: bool = False) -> _Abstracted:
    return tuple((name, _abstract(value, coarse)) for name, value in values.items())


def _builds_inplace(value: Value | None) -> bool:
    if value is None:
        return False
    for option in [collapse(value)] if not isinstance(value, Choice) else [o for _, o in value.options]:
        if isinstance(option, Module) and (
            option.writes is not None or any(_builds_inplace(item) for item in option.items or ())
        ):
            return True
        if isinstance(option, Val) and option.items is not None and any(_builds_inplace(item) for item in option.items):
            return True
    return False


def _is_static(node: cst.FunctionDef) -> bool:
    return any(dotted(decorator.decorator) == "staticmethod" for decorator in node.decorators)


def _defaults_to_none(param: cst.Param) -> bool:
    return isinstance(param.default, cst.Name) and param.default.value == "None"


def _canonical(ctx: FileContext, name: str) -> str:
    return ctx.imports.qualname(cst.Name(name)) or name
