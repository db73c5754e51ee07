"""How the interpreter evaluates a call: torch ops, tensor methods, modules, classes, project code.

Each kind of callee says what it does to the values it is given — an in-place write, a save for
backward, a view or a fresh tensor, a module built — using the op table generated from torch for
torch's own callees and a run of the callee with these arguments for project code. A callee
that is a `Choice` (a module picked by a configuration) is called once per option, each under
its condition.
"""

from __future__ import annotations

import re
import string
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import libcst as cst

from .arguments import Args, Binding, evaluate
from .classes import ClassInfo, FunctionRef
from .conditions import OPTION, Assumption, Condition, consistent
from .hazards import Hazard, hook_input_reason
from .imports import dotted
from .instances import Instance, submodules
from .model import Form
from .modules import ModuleFactory
from .python_types import class_name, isinstance_of_known, partial_attribute
from .state import PendingWrite, SaveRecord, Site, State, Step, next_order
from .summaries import ParamWrite, Slot, Summary
from .syntax import (
    if_tests_around,
    is_property,
    is_tensor_annotation,
    literal,
    named_params,
    names_read,
    positional_params,
    spread_names,
)
from .training import TrainingLoop, looks_like_optimizer
from .values import (
    NOT_TENSOR,
    OUTER,
    SNAPSHOT,
    Choice,
    Const,
    DictVal,
    Func,
    Grad,
    Klass,
    Module,
    Namespace,
    Optimizer,
    Params,
    Partial,
    Super,
    Sym,
    Val,
    Value,
    as_tensor,
    collapse,
    deep_copied,
    deep_copied_module,
    element_of,
    fresh_id,
    fresh_storage,
    grad_of,
    graph_of,
    is_container,
    is_object,
    is_project_object,
    is_tensor,
    is_tensor_val,
    merge_all,
    merge_values,
    object_slot,
    options_of,
    reachable,
    tensors_in,
    with_graph,
)
from .vocabulary import (
    CONTAINER_FILLING_METHODS,
    EXPANDING_VIEWS,
    LEGACY_CONSTRUCTORS,
    NON_CONTIGUOUS_VIEWS,
    NON_TENSOR_METHODS,
    RECEIVER_METADATA_METHODS,
    SAFE_INPLACE_PREFIXES,
)

if TYPE_CHECKING:
    from .project import FileContext
    from .protocols import Interpreter
    from .torch_facts import OpFacts

_DTYPE_METHODS = {"float": "float32", "double": "float64", "half": "float16", "bfloat16": "bfloat16"}
_INTEGER_METHODS = frozenset({"long", "int", "bool", "short", "byte", "char"})
_TORCH_NAMESPACES = frozenset({"torch", "torch.nn.functional", "torch.special", "torch.linalg", "torch.fft"})
_FUNCTIONAL = "torch.nn.functional"
_CALLERS = " the caller's"
_LEGACY_VARIABLE = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})
# Module methods that return the module itself.
_SELF_RETURNING = frozenset(
    {
        "train",
        "eval",
        "to",
        "cuda",
        "cpu",
        "float",
        "double",
        "half",
        "bfloat16",
        "requires_grad_",
        "type",
        "share_memory",
        "apply",
    }
)
# nn.Module's own dicts of what it registered, read by name where `getattr` would do.
_REGISTRIES: dict[str, Callable[[Value], bool]] = {
    "_modules": lambda value: isinstance(value, Module),
    "_parameters": is_tensor,
    "_buffers": is_tensor,
}
# Factories whose tensor is memory to be filled (an out-parameter a callee writes, read afterwards
# on purpose); `torch.tensor(data)`, `randn`, `arange` hold values a callee's write destroys.
_BUFFER_FACTORIES = ("zeros", "empty", "ones", "full")
# Functions that return the tensor they are given when it already has the dtype asked for.
_ADOPTING = frozenset({"as_tensor", "asarray"})
_MAX_RANGE = 8  # numbers of a `range` of known bounds the interpreter enumerates
_DICT_METHODS = frozenset({"get", "values", "items", "keys", "update", "setdefault", "pop", "copy", "clear", "popitem"})
# Those that read a mapping: on what code we cannot see returned, a dict more likely than a tensor.
_MAPPING_READERS = frozenset({"get", "values", "items", "keys"})
# Classes whose instances are their constructor's keywords, read as attributes.
_NAMESPACE_CLASSES = frozenset({"types.SimpleNamespace", "argparse.Namespace"})
# What a name bound in this run can hold that a call of it runs (not a tensor, list or dict).
_CALLABLE_VALUES = (Klass, Func, Partial, Module)
# Functions that return their last argument unchanged: a type checker's view, not a new value.
_TYPE_CASTS = frozenset({"typing.cast", "typing_extensions.cast"})
_CONTAINER_GROWERS = frozenset({"append", "extend", "insert", "add_module", "register_module", "update"})
# The fields of torch.return_types (`values, indices` of max/min/sort/topk/kthvalue/mode/
# median/cummax, `Q, R` of qr, `eigenvalues, eigenvectors`), by position.
RETURN_FIELDS = {
    "values": 0,
    "indices": 1,
    "Q": 0,
    "R": 1,
    "eigenvalues": 0,
    "eigenvectors": 1,
    "U": 0,
    "S": 1,
    "Vh": 2,
}


class CallEvaluator:
    """The call half of the interpreter, composed into it (see interpreter.py for the state)."""

    def __init__(self, interp: Interpreter) -> None:
        # A proxy, so that an interpreter and its halves form no reference cycle: each run's
        # interpreter and everything it holds is freed when the run returns, not left to the
        # cyclic collector (which walked them, and every syntax tree, again and again).
        self.i = cast("Interpreter", weakref.proxy(interp))
        self.modules = ModuleFactory(self.i)
        self.loop = TrainingLoop(self.i)
        # The modules, optimizers and parameters runs handed this one, by identity (kept, so
        # that an id stays theirs): one handed again is a new object (`_made_anew`).
        self.handed_out: dict[int, Value] = {}

    # ----------------------------------------------------------------- dispatch

    def eval_call(self, call: cst.Call, state: State) -> Value:
        func = call.func
        qualname = self.i.ctx.imports.qualname(func)
        if qualname in _TYPE_CASTS:  # `cast(list[Tensor], xs)` is `xs`
            args = self.arguments(call, state)
            return args.positional[-1] if args.positional else NOT_TENSOR
        if qualname == "copy.copy" and len(call.args) == 1:
            args = self.arguments(call, state)
            source = collapse(args.positional[0]) if args.positional else NOT_TENSOR
            if isinstance(source, Module) and source.params:  # a shallow copy shares the parameters
                return replace(source, ident=fresh_id(), copied=call)
        if qualname == "copy.deepcopy" and len(call.args) == 1:
            args = self.arguments(call, state)
            copied = deep_copied(args.positional[0], call) if args.positional else None
            if copied is not None:
                return copied
            if args.positional and isinstance(source := collapse(args.positional[0]), Module) and source.params:
                return deep_copied_module(source)
            if isinstance(func, cst.Attribute):  # a module or an object: as any library call
                return self.call_on(self.i.eval(func.value, state), func.value, func.attr.value, call, args, state)
            return self.call_value(self.i.eval(func, state), call, args, state)
        if qualname is not None and qualname.split(".")[0] in ("torch", "functools", "itertools", "types", "argparse"):
            short = qualname.rsplit(".", 1)[-1]
            like = short.endswith("_like") and self.i.facts.is_factory(short)  # `torch.zeros_like(x)`
            args = self.arguments(call, state, first_unread=like)
            return self.call_value(self.i.engine.torch_value(qualname), call, args, state)
        if isinstance(func, cst.Attribute) and _callable(state.env.get(dotted(func) or "")):
            callee = self.i.eval(func, state)  # `self.model(config=self)`: the class a method bound to it
            return self.call_value(callee, call, self.arguments(call, state), state)
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in RECEIVER_METADATA_METHODS or (
                method in CONTAINER_FILLING_METHODS and is_container(self.i.peek(func.value, state))
            ):
                receiver = self.i.peek(func.value, state)  # `x.size()`, `xs.append(y)`: not a read of the values
            else:
                receiver = self.i.eval(func.value, state)
            args = self.arguments(call, state)
            return self.call_on(receiver, func.value, method, call, args, state)
        if isinstance(func, cst.Name) and func.value == "len":
            sized = [self.i.peek(arg.value, state) for arg in call.args]
            return _counted(collapse(sized[0])) if len(sized) == 1 else NOT_TENSOR
        callee = self.i.eval(func, state)
        args = self.arguments(call, state)
        return self.call_value(callee, call, args, state)

    def arguments(self, call: cst.Call, state: State, first_unread: bool = False) -> Args:
        """The call's arguments; `first_unread`: the first is read only for its metadata."""
        if first_unread and call.args and not call.args[0].star and call.args[0].keyword is None:
            first = call.args[0].value
            return evaluate(call, lambda expr, at: (self.i.unread if expr is first else self.i.eval)(expr, at), state)
        return evaluate(call, self.i.eval, state)

    def call_value(self, callee: Value, call: cst.Call, args: Args, state: State) -> Value:
        if isinstance(callee, Choice):
            return self.each_option(
                callee, lambda option, branch: self.call_value(option, call, args, branch), state, call
            )
        if isinstance(callee, Module):
            return self.apply_module(callee, call, args, state)
        if isinstance(callee, Partial):
            merged = args.prepend(list(callee.args)).with_keywords(dict(callee.kwargs))
            return self.call_value(callee.target, call, merged, state)
        if isinstance(callee, Klass):
            return self.construct(callee, call, args, state)
        if isinstance(callee, Func):
            if callee.qualname is not None:
                if callee.qualname.startswith("builtins."):
                    return self.call_builtin(callee.qualname[9:], call, args, state)
                return self.call_torch(callee.qualname, call, args, state)
            if isinstance(callee.ref, FunctionRef):
                ref, bound = callee.ref, callee.bound
                first = args.positional[0] if args.positional else None
                if bound is None and _unbound_method(ref) and is_project_object(first):
                    bound, args = first, args.after_first()  # `Config.train(con)`: its first argument is `self`
                return self.call_project(ref, call, args, state, bound, closure=callee.closure)
        return self.opaque_result(args, state)

    def each_option(
        self, choice: Choice, call: Callable[[Value, State], Value], state: State, site: cst.CSTNode
    ) -> Value:
        """Call each option of a `Choice` on its own copy of the path, under its condition; the
        paths and the results merge afterwards (the options exclude each other). Options whose
        conditions do not tell them apart (`norm_layer[0]` of a list grown unknowably: a
        BatchNorm or an Identity) are told apart by an assumption of their own, never worded,
        so that what one option saved is not blamed on what another returned."""
        results: list[tuple[Condition, Value]] = []
        states: list[State] = []
        outer = self.i.extra
        for condition, option in _options_apart(choice, site):
            if not consistent(state.condition | outer | condition):
                continue  # excluded on this path (`self.stride > 1` tested, the Identity built for stride 1)
            branch = state.copy()
            self.i.extra = outer | condition
            try:
                results.append((condition, call(option, branch)))
            finally:
                self.i.extra = outer
            states.append(branch)
        state.adopt(states, [value for _, value in results])
        # Each result under its option's condition (what the merged ones share, once merged), so
        # that a tensor keeps the condition of the option that returned it (`bound_when`).
        merged: Value | None = None
        when: Condition = frozenset()
        for condition, value in results:
            if merged is None:
                merged, when = value, condition
            else:
                merged, when = merge_values(merged, value, when, condition), when & condition
        return merged if merged is not None else NOT_TENSOR

    def call_on(
        self, receiver: Value, receiver_expr: cst.BaseExpression, method: str, call: cst.Call, args: Args, state: State
    ) -> Value:
        """`receiver.method(...)`."""
        self.i.note_blind(receiver_expr, receiver, writes=method in self.i.facts.inplace_methods)
        if isinstance(receiver, Choice) and not tensors_in(receiver):
            return self.each_option(
                receiver,
                lambda option, branch: self.call_on(option, receiver_expr, method, call, args, branch),
                state,
                call,
            )
        receiver = collapse(receiver)
        if is_tensor_val(receiver):
            return self.call_method(receiver, method, call, args, state)
        if method == "backward" and isinstance(receiver, Val) and receiver.items is None:
            self.loop.backward(receiver, call, state)
            return NOT_TENSOR
        if isinstance(receiver, Module):
            return self.module_method(receiver, receiver_expr, method, call, args, state)
        if isinstance(receiver, Super):
            return self.call_super(receiver, method, call, args, state)
        if isinstance(receiver, Optimizer):
            if method == "step":
                self.loop.step(receiver, call, state)
            return NOT_TENSOR
        if isinstance(receiver, DictVal):
            if method in _DICT_METHODS:
                return self.dict_method(receiver, receiver_expr, method, call, args, state)
            return self.call_value(
                self.attribute_of(receiver, method, call.func, state), call, args, state
            )  # `hparams.normalizer(x)`
        if isinstance(receiver, Val) and receiver.items is not None:
            return self.list_method(receiver, receiver_expr, method, call, args, state)
        if isinstance(receiver, (Klass, Func)) or _is_namespace(receiver):
            member = self.attribute_of(receiver, method, call.func, state)
            return self.call_value(member, call, args, state)
        if isinstance(receiver, Const) and isinstance(receiver.value, str):
            return _string_method(receiver.value, method, args)
        if (
            self.i.contract is not None
            and isinstance(receiver_expr, cst.Name)
            and receiver_expr.value == self.i.ctx_name
        ):
            self.i.contract.on_ctx_call(method, call, args.positional, state)
            return NOT_TENSOR
        if method == "step" and looks_like_optimizer(call):
            target = next((value for value in args.positional if isinstance(collapse(value), Optimizer)), None)
            self.loop.step(target if target is not None else Optimizer(None), call, state)
            return NOT_TENSOR
        if method == "apply":
            return self.call_autograd_function(receiver_expr, call, args, state)
        if method in ("parameters", "named_parameters"):
            params = Params(None, origin=call)
            return _named(params) if method == "named_parameters" else params
        typed = self.declared_result(receiver_expr, method, call) if not args.tensors() else None
        if typed is not None:
            return typed
        if isinstance(receiver, Sym) and not args.tensors():
            return Sym(f"{receiver.text}.{method}()")
        return self.opaque_result(args, state)

    def declared_result(self, receiver_expr: cst.BaseExpression, method: str, call: cst.Call) -> Value | None:
        """`src.csr()` on a parameter declared `src: SparseTensor` (a project class) whose object
        the run does not know: what the method's return annotation declares, tensors of unknown
        provenance (`-> Tuple[Tensor, Tensor, Optional[Tensor]]`), so that `x[col]` indexes
        with a tensor, a copy, not a view. (Given tensors, the call's opaque result is a tensor
        computed from them already.)"""
        running = self.i.running
        if running is None or not isinstance(receiver_expr, cst.Name):
            return None
        param = next((p for p in named_params(running) if p.name.value == receiver_expr.value), None)
        declared = param.annotation.annotation if param is not None and param.annotation is not None else None
        if not isinstance(declared, cst.Name):
            return None
        klass = self.i.engine.global_value(self.i.ctx, declared.value)
        if not isinstance(klass, Klass) or not isinstance(klass.ref, ClassInfo):
            return None
        ref = self.i.engine.method_of(klass.ref, method)
        returns = ref.node.returns if ref is not None else None
        return _declared_value(returns.annotation, call) if returns is not None else None

    # ----------------------------------------------------------------- attributes

    def attribute_of(self, base: Value, attr: str, expr: cst.BaseExpression, state: State) -> Value:
        if isinstance(base, Choice):
            options = [(condition, self.attribute_of(option, attr, expr, state)) for condition, option in base.options]
            return options[0][1] if len(options) == 1 else Choice(tuple(options))
        if isinstance(base, Module):
            return self.read_property(self.module_attribute(base, attr), expr, state)
        if isinstance(base, Klass):
            if attr in ("__name__", "__qualname__"):
                return Const(class_name(base))
            if base.qualname is not None:
                return self.i.engine.torch_value(f"{base.qualname}.{attr}")
            if isinstance(base.ref, ClassInfo):
                return self.i.engine.class_member(base.ref, attr, None)
            return NOT_TENSOR
        if _is_namespace(base):
            return self.i.engine.namespace_member(base, attr)
        if isinstance(base, Partial):
            return partial_attribute(base, attr)
        if isinstance(base, Sym):
            return Sym(f"{base.text}.{attr}")
        if isinstance(base, DictVal):
            found = base.get(attr)  # a config read by attribute (EasyDict, OmegaConf, SimpleNamespace)
            return found if found is not None else (base.rest if base.rest is not None else NOT_TENSOR)
        if (
            isinstance(base, Val)
            and base.items is not None
            and attr in RETURN_FIELDS
            and RETURN_FIELDS[attr] < len(base.items)
        ):
            return base.items[RETURN_FIELDS[attr]]  # `torch.topk(x, k).values`: torch.return_types' fields
        if not is_tensor(base):
            return NOT_TENSOR
        assert isinstance(base, Val)
        if attr == "data":
            return base.detached("data")
        if attr in self.i.facts.view_attributes:
            return base.view(strided=attr in NON_CONTIGUOUS_VIEWS)
        if attr == "grad":
            return Val(fresh_storage(), Grad.NO, origin=expr)
        return NOT_TENSOR

    def read_property(self, member: Value, expr: cst.BaseExpression, state: State) -> Value:
        """An instance's `@property` read runs its getter: mmcv's blocks reach their norm layers
        through `self.norm1`, a property returning `getattr(self, self.norm1_name)`."""
        if (
            isinstance(member, Func)
            and isinstance(member.ref, FunctionRef)
            and member.bound is not None
            and is_property(member.ref.node)
        ):
            return self.run_getter(member.ref, expr, member.bound, state)
        return member

    def run_getter(self, getter: FunctionRef, expr: cst.BaseExpression, bound: Value, state: State) -> Value:
        """The property `getter` of `bound`, called where `expr` reads it."""
        return self.call_project(getter, self.i.ctx.implicit_call(expr), Args(), state, bound)

    def module_attribute(self, module: Module, attr: str) -> Value:
        setting = module.setting(attr)  # a torch module's table settings, a dataclass's fields as passed
        if setting is not None:
            return setting
        if module.instance is not None:
            found = module.instance.attr(attr)
            if found is not None:
                return module.owned(found)
            if attr in _REGISTRIES:  # `self._modules["gcl_%d" % i]`: the attributes by name
                kept = _REGISTRIES[attr]
                named = ((name, module.owned(value)) for name, value in module.instance.attrs.items() if kept(value))
                return DictVal(tuple(named))
            if module.instance.container is not None and attr in ("weight", "bias"):
                return NOT_TENSOR
            return self.i.engine.class_member(module.instance.cls, attr, module)
        if attr in ("weight", "bias") and module.params:
            return Val(module.params, Grad.LEAF, origin=module.origin)
        if attr == "inplace":
            return Const(module.writes is not None)
        return NOT_TENSOR

    # ----------------------------------------------------------------- classes

    def construct(self, klass: Klass, call: cst.Call, args: Args, state: State) -> Value:
        qualname = klass.qualname
        if isinstance(klass.ref, ClassInfo):
            built = self.i.engine.instantiate(self.i, klass.ref, call, args, state)
            graph = graph_of(Val(items=tuple(args.values()))) if self.i.grad_enabled else frozenset()
            return replace(built, graph=graph) if isinstance(built, Module) and graph else built
        if qualname is None:
            return self.opaque_result(args, state)
        if qualname == "torch.nn.Parameter":
            requires = args.get("requires_grad", 1)
            grad = Grad.NO if isinstance(requires, Const) and requires.value is False else Grad.LEAF
            return Val(fresh_storage(), grad, origin=call)
        if qualname.startswith("torch.nn.") and qualname.count(".") == 2 and qualname[len("torch.nn.") :][:1].isupper():
            return self.modules.construct(qualname[len("torch.nn.") :], call, args, state)
        if (
            qualname.startswith("torch.optim.")
            and qualname.count(".") == 2
            and qualname[len("torch.optim.") :][:1].isupper()
        ):
            return self.loop.optimizer(args)
        if qualname in _NAMESPACE_CLASSES:
            return DictVal(
                tuple(args.keywords.items()), cell=fresh_id()
            )  # `SimpleNamespace(a=1)`: attributes are its keywords
        if qualname == "functools.partial" and args.positional:
            return Partial(args.positional[0], tuple(args.positional[1:]), tuple(args.keywords.items()))
        return self.call_torch(qualname, call, args, state)

    # ----------------------------------------------------------------- modules

    def apply_module(self, module: Module, call: cst.Call, args: Args, state: State) -> Value:
        module = self.i.patches.get(module.ident, module)
        label = self.label(call, module, args)
        inputs = Val(items=tuple(args.positional))
        for hook in state.hooked.of(module.ident, before=True):
            self.call_value(hook, call, Args([module, inputs], [None, None]), state)
        result = self.run_module(module, call, args, state, label)
        for hook in state.hooked.of(module.ident, before=False):
            self.hook_reads_rewritten_input(module, hook, call, args, state, label)
            self.call_value(hook, call, Args([module, inputs, result], [None, None, None]), state)  # returns ignored
        return result

    def hook_reads_rewritten_input(
        self, module: Module, hook: Value, call: cst.Call, args: Args, state: State, label: str
    ) -> None:
        """A forward hook on a module that rewrites its input in place reads the rewritten input
        (`nn.ReLU(inplace=True)` hooked to record what it was given)."""
        if not isinstance(hook, Func) or hook.ref is None or module.kind is None or not args.tensors():
            return
        condition = self.modules.input_write(module, state)
        positional = positional_params(hook.ref.node)
        positional = positional[1:] if hook.bound is not None else positional
        if condition is None or len(positional) < 2 or not self.i.grad_enabled:
            return
        hook_ctx = self.i.project.file(Path(hook.ref.path)) or self.i.ctx
        if positional[1].name.value not in hook_ctx.words(hook.ref.node.body).names:
            return  # a hook that only looks at the output
        site, calls = self.modules.culprit_site(module, call, label)
        first = call.args[0].value if call.args else call
        written = args.input_text or self.i.ctx.code_of(first)
        name, path, node = hook.name, hook.ref.path, hook.ref.node
        span_of = self.i.engine.span_of(path)
        self.i.emit(
            Form.INPLACE_ACTIVATION,
            site or Site(self.i.ctx.path, call),
            f"`{label}` with inplace=True rewrites `{written}` in place",
            Hazard(True, lambda: hook_input_reason(name, path, span_of(node)), silent=True),
            condition=condition | state.condition,
            calls=calls,
            flag=module.flag,
        )

    def run_module(self, module: Module, call: cst.Call, args: Args, state: State, label: str) -> Value:
        """The module's forward on these arguments; a full backward hook makes its input and
        output views."""
        if module.ident in state.hooked and args.positional and is_tensor(args.positional[0]):
            # A full backward hook passes the inputs through `BackwardHookFunction` too: the
            # module's forward gets views it must not write in place (an inplace ReLU raises).
            hooked_input = replace(as_tensor(args.positional[0]), hooked=f"the input of `{label}`", origin=call)
            args = replace(args, positional=[hooked_input, *args.positional[1:]])
        if module.instance is not None:
            forward = self.i.engine.method_of(module.instance.cls, "forward") or self.i.engine.method_of(
                module.instance.cls, "__call__"
            )
            if forward is not None:
                result = self.call_project(forward, call, args, state, module)
            elif module.instance.container is not None:
                result = self.modules.apply_torch(module.instance.container, call, args, state, label)
            else:
                result = self.opaque_result(args, state)
        elif module.kind is None:
            result = self.opaque_result(args, state, module_call=call)
        else:
            result = self.modules.apply_torch(module, call, args, state, label)
        if module.ident in state.hooked and is_tensor(result):
            result = replace(as_tensor(result), hooked=f"the output of `{label}`", origin=call)
        return result

    def apply_sequence(self, container: Module, call: cst.Call, args: Args, state: State) -> Value:
        """The layers in order, each named as a user indexes it when the container's items are
        known one for one (by key, or by index in an `nn.Sequential(a, b, c)`)."""
        items, keys = container.items or (), container.keys
        value: Value = args.positional[0] if args.positional else NOT_TENSOR
        given = call.args[0].value if call.args else None
        owner = args.callee_text or self.i.ctx.code_of(call.func)
        text = args.input_text
        for index, item in enumerate(items):
            key = keys[index] if keys is not None and index < len(keys) and keys[index].isidentifier() else None
            layer = f"{owner}.{key}" if key is not None else f"{owner}[{index}]" if container.exact else None
            layer_args = Args([value], [given], callee_text=layer, input_text=text)
            if isinstance(item, Val) and not item.is_tensor and item.items is None:
                value = self.opaque_result(layer_args, state, module_call=call)  # a layer not known: still a layer
            else:
                value = self.call_value(item, call, layer_args, state)
            text = f"{layer}(...)" if layer is not None else f"{owner}[...](...)"
        return value

    def label(self, call: cst.Call, module: Module, args: Args) -> str:
        text = args.callee_text or self.i.ctx.code_of(call.func)
        kind = module.kind or module.label
        return f"{text} ({kind})" if kind and kind != text else text

    def module_method(
        self, module: Module, receiver_expr: cst.BaseExpression, method: str, call: cst.Call, args: Args, state: State
    ) -> Value:
        """A method of a module value: the project class's own first, as Python's lookup finds it
        (a trainer's `train(batch)`, a model's `train(mode)` that freezes its norms), then
        torch's."""
        defined = self.i.engine.method_of(module.instance.cls, method) if module.instance is not None else None
        if defined is not None:
            bound = self.as_assigned(module, receiver_expr, state)
            if is_property(defined.node):  # `self.norm1(x)`: the getter's module, called
                return self.call_value(self.run_getter(defined, call.func, bound, state), call, args, state)
            return self.call_project(defined, call, args, state, bound)
        if method in _SELF_RETURNING:
            return module
        if method in ("parameters", "named_parameters", "buffers"):
            params = Params(module.params if module.kind is not None or module.instance is not None else None, call)
            return _named(params) if method == "named_parameters" else params
        if method == "load_state_dict" and module.params:
            self.loop.load(module, call, state)
            return NOT_TENSOR
        if method == "state_dict" and module.params and not args.positional and not args.keywords:
            return Val(items=(Val(module.params, Grad.NO, origin=call, hidden=SNAPSHOT),))
        if method in ("modules", "children", "named_modules", "named_children"):
            own = None
            if self.i.constructing and isinstance(receiver_expr, cst.Name) and receiver_expr.value == "self":
                own = {
                    name: value
                    for name, value in state.env.items()
                    if name.startswith("self.") and name.count(".") == 1
                }
            modules = submodules(module, own=own)
            if method in ("children", "named_children"):
                modules = [(name, child) for name, child in modules[1:] if name and "." not in name]
            if method.startswith("named_"):
                return Val(items=tuple(Val(items=(Const(name), item)) for name, item in modules))
            return Val(items=tuple(item for _, item in modules))
        named_child = method in ("add_module", "register_module") and module.kind is None and module.items is None
        if (method in ("register_buffer", "register_parameter") or named_child) and len(args.positional) >= 2:
            # `self.add_module('generator', generator)` is `self.generator = generator`
            key, owner = collapse(args.positional[0]), dotted(receiver_expr)
            if isinstance(key, Const) and isinstance(key.value, str) and owner is not None:
                value = collapse(args.positional[1])
                if method == "register_parameter" and is_tensor_val(value):
                    value = replace(value, grad=Grad.LEAF, origin=call)
                state.env[f"{owner}.{key.value}"] = value
            return Const(None)
        if method in ("register_full_backward_hook", "register_backward_hook"):
            state.hooked = state.hooked.with_backward(module.ident)
            return NOT_TENSOR
        if method in ("register_forward_hook", "register_forward_pre_hook") and args.positional:
            if "with_kwargs" not in args.keywords:  # a hook that takes the keyword arguments too: not run
                before = method == "register_forward_pre_hook"
                state.hooked = state.hooked.with_forward(module.ident, before, args.positional[0])
            return NOT_TENSOR
        if method in _CONTAINER_GROWERS and (
            module.items is not None or module.kind in ("Sequential", "ModuleList", "ModuleDict")
        ):
            grown = self.grown_module(module, method, args)
            name = dotted(receiver_expr)
            if name is not None:
                state.env[name] = grown
            return NOT_TENSOR
        if method == "forward":
            return self.apply_module(module, call, args, state)
        if module.instance is not None:
            attribute = module.instance.attr(method)
            if attribute is not None:
                return self.call_value(attribute, call, args, state)
            member = self.i.engine.class_member(module.instance.cls, method, module)
            if isinstance(member, (Klass, Func, Partial)):  # a class attribute (`self.handle_class()`)
                return self.call_value(member, call, args, state)
        return self.opaque_result(args, state)

    def as_assigned(self, module: Module, receiver_expr: cst.BaseExpression, state: State) -> Module:
        """The object with the networks and optimizers this run gave it so far: a trainer's
        `train()` that sets `self.model` and `self.optimizer`, then calls `self.optimize(batch)`,
        which steps them. Only new attributes: what the object had since `__init__` (which
        builds it as it goes) stays as the instance knows it, open to what the rounds of a
        caller's loop change, unless it was a placeholder (`self.optimizer = None`). One object per
        object and assignments: the memo keys runs by it."""
        owner = dotted(receiver_expr)
        if owner is None or module.instance is None or self.i.constructing:
            return module
        prefix = f"{owner}."
        attrs = module.instance.attrs
        assigned = tuple(
            (name[len(prefix) :], value)
            for name, value in state.env.items()
            if name.startswith(prefix)
            and "." not in name[len(prefix) :]
            and _placeholder(attrs.get(name[len(prefix) :]))
            and any(isinstance(option, (Module, Optimizer)) for _, option in options_of(value))
        )
        if not assigned:
            return module
        key = (id(module.instance), module.ident, tuple((name, id(value)) for name, value in assigned))
        known = self.i.engine.assigned_objects.get(key)
        if known is None:
            # the objects whose ids make the key are kept with it: a freed one's id may be reused
            known = self.i.engine.assigned_objects[key] = (_with_attrs(module, dict(assigned)), (module, assigned))
        return known[0]

    def grown_module(self, module: Module, method: str, args: Args) -> Module:
        items = list(module.items or ())
        keys = (
            list(module.keys) if module.keys is not None else None if module.items else []
        )  # an empty container names its children as they come
        new: list[Value] = []
        if method in ("append", "register_module", "add_module"):
            new = [args.positional[-1]] if args.positional else []
            if method != "append" and args.positional and keys is not None:
                key = collapse(args.positional[0])
                keys.append(str(key.value) if isinstance(key, Const) else "*")
        elif method == "extend":
            extra = collapse(args.positional[0]) if args.positional else NOT_TENSOR
            new = list(extra.items or ()) if isinstance(extra, (Val, Module)) and extra.items is not None else []
        elif method == "insert":
            new = [args.positional[1]] if len(args.positional) > 1 else []
        elif method == "update":
            extra = collapse(args.positional[0]) if args.positional else NOT_TENSOR
            if isinstance(extra, DictVal):
                keys = keys or []
                for entry_key, item in extra.entries:
                    keys.append(str(entry_key))
                    new.append(item)
        items += new
        params = frozenset().union(*(item.params for item in items if isinstance(item, Module)))
        return replace(
            module,
            items=tuple(items),
            keys=tuple(keys)
            if keys is not None and len(keys) == len(items)
            else module.keys
            if len(items) == len(module.items or ())
            else None,
            params=module.params | params,
            exact=False,  # grown: in a loop of unknown rounds, the rounds the analysis ran
        )

    def call_super(self, proxy: Super, method: str, call: cst.Call, args: Args, state: State) -> Value:
        """`super().__init__(...)`, `super().forward(x)`: the next project base's method on the
        same `self`; a torch base's `__init__` builds the container the class then is."""
        engine = self.i.engine
        bound = state.env.get("self")
        for owner in engine.mro(proxy.cls)[1:]:
            node = owner.methods.get(method)
            if node is not None:
                return self.call_project(FunctionRef(owner.path, node, owner), call, args, state, bound)
        kind = engine.torch_base(proxy.cls)
        if kind is None:
            return Const(None) if method == "__init__" else self.opaque_result(args, state)
        if method == "__init__":
            if (
                kind in self.i.facts.module_saves
                or kind in ("Sequential", "ModuleList", "ModuleDict")
                or kind in self.i.facts.inplace_modules
            ):
                state.env["self.__container__"] = self.modules.construct(kind, call, args, state)
            return Const(None)
        if method == "forward":
            # built by this run's `super().__init__`, else by the instance's (`class Conv2d(nn.Conv2d)`)
            container = collapse(state.env.get("self.__container__", NOT_TENSOR))
            if not isinstance(container, Module) and is_project_object(bound):
                container = cast(Instance, bound.instance).container or NOT_TENSOR
            if isinstance(container, Module):
                return self.modules.apply_torch(container, call, args, state, self.i.ctx.code_of(call.func))
        return self.opaque_result(args, state)

    # ----------------------------------------------------------------- containers

    def list_method(
        self, receiver: Val, receiver_expr: cst.BaseExpression, method: str, call: cst.Call, args: Args, state: State
    ) -> Value:
        if method in ("append", "extend", "insert"):
            if method == "append":
                grown = self.extended(receiver, Val(items=tuple(args.positional[-1:])))
            elif method == "extend":
                grown = self.extended(receiver, args.positional[0] if args.positional else NOT_TENSOR)
            else:
                grown = self.extended(receiver, Val(items=tuple(args.positional[1:2])))
            self.i.rebind_container(receiver_expr, receiver, grown, state)
            if not self.owns(receiver_expr, state):
                state.escaped |= graph_of(Val(items=tuple(args.positional)))
            return Const(None)
        if method == "pop":
            return element_of(receiver)
        if method in ("copy",):
            return replace(receiver, cell=fresh_id())
        if method in ("index", "count"):
            return NOT_TENSOR
        return self.opaque_result(args, state)

    def owns(self, expr: cst.BaseExpression, state: State) -> bool:
        """A container the function made itself (not an argument, not an attribute)."""
        name = dotted(expr)
        return (
            name is not None
            and "." not in name
            and not (reachable(state.env.get(name, NOT_TENSOR)) & self.i.param_storages)
        )

    def extended(self, container: Value, extra: Value) -> Value:
        container, extra = collapse(container), collapse(extra)
        base = list(container.items) if isinstance(container, Val) and container.items is not None else []
        more = (
            list(extra.items)
            if isinstance(extra, (Val, Module)) and extra.items is not None
            else [element_of(extra)]
            if extra is not NOT_TENSOR
            else []
        )
        cell = container.cell if isinstance(container, Val) else None
        return Val(items=tuple(base + more), cell=cell if cell is not None else fresh_id())

    def dict_method(
        self,
        receiver: DictVal,
        receiver_expr: cst.BaseExpression,
        method: str,
        call: cst.Call,
        args: Args,
        state: State,
    ) -> Value:
        if method in ("get", "pop"):
            key: object = collapse(args.positional[0]) if args.positional else None
            found = receiver.get(key.value) if isinstance(key, Const) else None
            default = args.positional[1] if len(args.positional) > 1 else Const(None)
            if method == "pop" and found is not None and isinstance(key, Const):  # found: a Const key
                self.i.rebind_container(receiver_expr, receiver, receiver.without(key.value), state)
            return found if found is not None else (receiver.rest if receiver.rest is not None else default)
        if method in ("values", "items", "keys"):
            values = receiver.values()
            if method == "values":
                return Val(items=tuple(values))
            if method == "keys":
                return Val(items=tuple(Const(key) for key, _ in receiver.entries))
            return Val(items=tuple(Val(items=(Const(key), value)) for key, value in receiver.entries))
        if method in ("update", "setdefault"):
            updated = receiver
            if method == "update" and args.positional and isinstance(other := collapse(args.positional[0]), DictVal):
                for key, value in other.entries:
                    updated = updated.set(key, value)
            for key, value in args.keywords.items():
                updated = updated.set(key, value)
            if method == "setdefault" and args.positional:
                key = collapse(args.positional[0])
                if isinstance(key, Const) and receiver.get(key.value) is None:
                    updated = updated.set(key.value, args.positional[1] if len(args.positional) > 1 else Const(None))
            self.i.rebind_container(receiver_expr, receiver, updated, state)
            if method == "setdefault" and args.positional and isinstance(given := collapse(args.positional[0]), Const):
                # `set` just stored the key: not found only under a key unequal to itself (NaN)
                return updated.get(given.value)  # type: ignore[return-value]
            return Const(None)
        if method == "copy":
            return replace(receiver, cell=fresh_id())
        return NOT_TENSOR

    # ----------------------------------------------------------------- builtins

    def call_builtin(self, name: str, call: cst.Call, args: Args, state: State) -> Value:
        first = args.positional[0] if args.positional else None
        if name == "eval" and len(args.positional) == 1 and isinstance(text := collapse(args.positional[0]), Const):
            # `eval("Encoder{}".format(model_type))`: a class named by a string the code built
            parsed = self.i.ctx.evaluated(text.value, call) if isinstance(text.value, str) else None
            return self.i.eval(parsed, state) if parsed is not None else self.opaque_result(args, state)
        if name == "getattr" and len(args.positional) >= 2 and first is not None:
            key = collapse(args.positional[1])
            if isinstance(key, Sym) and key.default is not None and isinstance(key.default.value, str):
                # `getattr(nn, activation)()` with `activation='ReLU'` passed down as a default:
                # the default's class when it holds, and nothing known otherwise
                default = key.default.value
                holds = Assumption(key.text, f"== {default!r}", True, repr(default))
                named = self.call_builtin(
                    name, call, replace(args, positional=[first, key.default, *args.positional[2:]]), state
                )
                return Choice(((frozenset({holds}), named), (frozenset({holds.negated()}), NOT_TENSOR)))
            if isinstance(key, Const) and isinstance(key.value, str):
                found = self.attribute_of(
                    collapse(first) if not isinstance(first, Choice) else first, key.value, call, state
                )
                if found is NOT_TENSOR and len(args.positional) > 2:
                    return args.positional[2]
                return found
            return self.opaque_result(args, state)
        if name == "setattr" and len(args.positional) >= 3 and call.args:
            key = collapse(args.positional[1])
            owner = dotted(call.args[0].value)
            if owner is not None:
                attribute = key.value if isinstance(key, Const) and isinstance(key.value, str) else "*"
                target = f"{owner}.{attribute}"
                state.env[target] = (
                    merge_values(state.env.get(target), args.positional[2]) if attribute == "*" else args.positional[2]
                )
            return Const(None)
        if name == "hasattr" and len(args.positional) >= 2 and first is not None:
            key = collapse(args.positional[1])
            if isinstance(key, Const) and isinstance(key.value, str) and isinstance(collapse(first), Module):
                found = self.attribute_of(collapse(first), key.value, call, state)
                return Const(found is not NOT_TENSOR)
            return NOT_TENSOR
        if name == "isinstance" and len(args.positional) >= 2:
            return self.isinstance_of(args.positional[0], args.positional[1])
        if name in ("list", "tuple") and first is not None:
            # per option: `tuple(v for v in outputs if v is not None)` may build lists of each length
            converted = [(condition, _sequence(name, option)) for condition, option in options_of(first)]
            return converted[0][1] if len(converted) == 1 else Choice(tuple(converted))
        if name in ("list", "tuple"):
            return Val(items=(), cell=fresh_id() if name == "list" else None)
        if name == "dict":
            result = DictVal(cell=fresh_id())
            if first is not None and isinstance(given := collapse(first), DictVal):
                result = replace(given, cell=fresh_id())
            elif first is not None and isinstance(given := collapse(first), Val) and given.items is not None:
                for pair in given.items:
                    key, value = (
                        (part.items or (NOT_TENSOR, NOT_TENSOR))[:2]
                        if isinstance(part := collapse(pair), Val)
                        else (NOT_TENSOR, NOT_TENSOR)
                    )
                    if isinstance(key, Const):
                        result = result.set(key.value, value)
                    else:  # `dict(model.named_parameters())`: values under names not known
                        result = replace(result, rest=merge_values(result.rest, value))
            for keyword, value in args.keywords.items():
                result = result.set(keyword, value)
            return result
        if name == "map" and len(args.positional) >= 2 and (mapped := self.mapped(call, args, state)) is not None:
            return mapped
        if name in ("reversed", "sorted", "iter", "filter"):
            return args.positional[-1] if args.positional else NOT_TENSOR
        if name == "next":
            return element_of(first) if first is not None else NOT_TENSOR
        if name == "super":
            return self.i.engine.super_of(self.i)
        if name in (
            "int",
            "float",
            "bool",
            "str",
            "len",
            "range",
            "print",
            "abs",
            "round",
            "id",
            "hash",
            "type",
            "repr",
            "format",
            "all",
            "any",
            "min",
            "max",
            "sum",
            "divmod",
            "pow",
            "callable",
            "vars",
            "dir",
            "enumerate",
            "zip",
            "map",
        ):
            if name in ("min", "max", "sum", "abs", "pow", "round", "map") and args.tensors():
                return self.opaque_result(args, state)
            if (
                name in ("int", "float", "bool", "str")
                and first is not None
                and isinstance(given := collapse(first), Const)
            ):
                try:
                    return Const({"int": int, "float": float, "bool": bool, "str": str}[name](given.value))
                except Exception:
                    return NOT_TENSOR
            if name == "enumerate" and first is not None:
                return Val(items=(Val(items=(NOT_TENSOR, element_of(first))),))
            if name == "zip":
                return Val(items=(Val(items=tuple(element_of(value) for value in args.positional)),))
            if name == "range":
                return _range(args)
            if (
                name in ("min", "max")
                and args.positional
                and all(isinstance(collapse(v), Const) for v in args.positional)
            ):
                try:
                    # Constants of any type: incomparable ones raise, and the result is not known.
                    values: list[Any] = [c.value for v in args.positional if isinstance(c := collapse(v), Const)]
                    return Const(min(values) if name == "min" else max(values))
                except Exception:
                    return NOT_TENSOR
            return NOT_TENSOR
        return self.opaque_result(args, state)

    def mapped(self, call: cst.Call, args: Args, state: State) -> Value | None:
        """`map(f, xs, ...)` over sequences whose elements are known: `f` called on each, the
        results in order (`q, k, v = map(lambda t: rearrange(t, ...), (q, k, v))` keeps each a view
        of the chunk it reshapes; mmdet's `multi_apply(self.forward_single, feats)` runs the head
        on each level)."""
        sequences = [collapse(value) for value in args.positional[1:]]
        items = [value.items for value in sequences if isinstance(value, Val) and not value.is_tensor]
        if len(items) != len(sequences) or not all(items):
            return None
        exprs = [_elements(expr) for expr in args.positional_exprs[1:]]
        results = []
        # `map` stops at the shortest sequence, as `zip` does
        for index, positional in enumerate(zip(*cast("list[tuple[Value, ...]]", items), strict=False)):
            at = [elements[index] if elements is not None else None for elements in exprs]
            results.append(self.call_value(args.positional[0], call, Args(list(positional), at), state))
        return Val(items=tuple(results))

    def isinstance_of(self, value: Value, kinds: Value) -> Value:
        verdicts = {self.isinstance_verdict(option, kinds) for _, option in options_of(value)}
        if verdicts == {True}:
            return Const(True)
        if verdicts == {False}:
            return Const(False)
        return NOT_TENSOR

    def isinstance_verdict(self, value: Value, kinds: Value) -> bool | None:
        """`isinstance(value, kinds)` for one value, when it can be told."""
        named = list(given.items or ()) if isinstance(given := collapse(kinds), Val) else [kinds]
        value = collapse(value)
        known = isinstance_of_known(value, named)
        if known is not None:
            return known
        classes = [kind for kind in named if isinstance(kind, Klass)]
        if isinstance(value, Module):
            answers = [self.is_instance(value, kind) for kind in classes]
            return True if any(answers) else (False if all(answer is False for answer in answers) else None)
        if is_tensor(value):
            return any(isinstance(kind, Klass) and kind.qualname == "torch.Tensor" for kind in classes) or None
        return None

    def is_instance(self, module: Module, kind: Value) -> bool | None:
        kind = collapse(kind)
        if not isinstance(kind, Klass):
            return None
        if kind.qualname is not None and module.kind is not None and module.instance is None:
            return kind.qualname in (f"torch.nn.{module.kind}", "torch.nn.Module")
        if kind.qualname == "torch.nn.Module":
            return True
        if module.instance is not None and isinstance(kind.ref, ClassInfo):
            return self.i.engine.subclass_of(module.instance.cls, kind.ref)
        return False

    # ----------------------------------------------------------------- torch

    def call_torch(self, qualname: str, call: cst.Call, args: Args, state: State) -> Value:
        if qualname in self.i.facts.module_returning_functions and args.positional:
            return args.positional[0]  # `spectral_norm(nn.Conv2d(...))`: the module, reparametrised
        if qualname in _LEGACY_VARIABLE and args.positional and is_tensor_val(first := collapse(args.positional[0])):
            # `Variable(x, requires_grad=True)`: a new leaf on x's data, cut from x's graph
            leaf = literal_true(args.get("requires_grad", 1)) and self.i.grad_enabled
            return replace(first, grad=Grad.LEAF if leaf else Grad.NO, graph=frozenset(), hooked=None, origin=call)
        if qualname.startswith(SAFE_INPLACE_PREFIXES):
            return NOT_TENSOR
        if qualname in ("torch.autograd.backward",) and args.positional:
            self.loop.backward(args.positional[0], call, state)
            return NOT_TENSOR
        if qualname == "torch.autograd.grad":
            state.escaped |= graph_of(args.positional[0]) if args.positional else frozenset()
            return self.opaque_result(args, state)
        if qualname == "itertools.chain":
            return Val(items=tuple(args.positional))
        if qualname in _LOADERS:
            self.load_items(call, args, state)
        short = qualname.rsplit(".", 1)[-1]
        namespace = qualname[: -len(short) - 1]
        if namespace not in _TORCH_NAMESPACES:
            return self.opaque_result(args, state) if namespace.startswith("torch") else NOT_TENSOR
        facts = self.i.facts
        if (
            short in _ADOPTING
            and namespace == "torch"
            and args.positional
            and is_tensor_val(given := collapse(args.positional[0]))
        ):
            return self.convert(given, "to", call, args)  # `torch.as_tensor(t)`: `t` itself when its dtype matches
        if (namespace == "torch" and facts.is_factory(short)) or (
            qualname in LEGACY_CONSTRUCTORS and not args.tensors()
        ):
            requires_grad = literal_true(args.keywords.get("requires_grad"))
            if requires_grad and self.i.grad_enabled:
                return Val(fresh_storage(), Grad.LEAF, origin=call)
            buffer = short.startswith(_BUFFER_FACTORIES) if namespace == "torch" else _sizes_only(args)
            return Val(
                fresh_storage(),
                Grad.NO,
                origin=call,
                fresh_buffer=buffer,
                dtype=named_dtype(call),
                inference=self.i.inference,
            )
        tensors = args.tensors()
        twin = facts.inplace_functions.get(short) if namespace in ("torch", _FUNCTIONAL) else None
        flag = self.inplace_flag(short, args) if namespace == _FUNCTIONAL else None
        first_expr = (
            args.positional_exprs[0] if args.positional_exprs and args.positional_exprs[0] is not None else call
        )
        if not tensors and args.positional and (twin is not None or flag is not None):
            # `F.relu(x, inplace=True)` on a parameter nobody here passes: its callers decide
            self.i.note_blind(first_expr, args.positional[0], writes=True)
        if not tensors or (
            namespace == "torch"
            and short not in facts.tensor_functions
            and short not in facts.ops
            and short not in facts.overloads
        ):
            if tensors:
                return self.opaque_result(args, state)
            return NOT_TENSOR
        label = self.i.ctx.code_of(call.func)
        first_value = collapse(args.positional[0]) if args.positional else tensors[0]
        if twin is not None or flag is not None:
            # torch.relu_(x), F.relu(x, inplace=True): rewrites its input
            condition = frozenset() if twin is not None else flag
            target = first_value if is_tensor_val(first_value) else tensors[0]
            if condition is not None:
                self.i.write(
                    Form.INPLACE_ACTIVATION,
                    call,
                    first_expr,
                    target,
                    state,
                    f"`{label}(...)` rewrites",
                    hidden_from_reader=True,
                    condition=condition,
                )
                saved = facts.inplace_function_saves.get(short)
                if saved is None:  # not probed: fall back to what the out-of-place twin saves
                    self.i.record_op(
                        twin or short,
                        label,
                        {"self": target},
                        target,
                        call,
                        state,
                        {},
                        only=lambda kind: kind == "result",
                    )
                elif "result" in saved and self.i.grad_enabled and target.grad > Grad.NO:
                    record = self.i.save(state, target, label, "its result", call, certain=target.grad > Grad.UNKNOWN)
                    self.i.regraph(target, frozenset({record.order}), state, target.grad)
                    return replace(target, graph=target.graph | {record.order})
                return target
        out = args.keywords.get("out")
        if out is not None and is_tensor(out):
            out_expr = args.keyword_exprs.get("out") or call
            self.i.write(
                Form.OUT_ARGUMENT, call, out_expr, as_tensor(out), state, f"`{label}(..., out=...)` writes into"
            )
            return out
        overload = facts.overload(short, [is_tensor(value) for value in args.positional], list(args.keywords))
        result = self.result_of(short, overload, [first_value, *args.values()])
        if short in facts.view_methods and is_tensor_val(first_value):
            result = first_value.view(short in NON_CONTIGUOUS_VIEWS, call if short in EXPANDING_VIEWS else None)
        if short in facts.multi_view_methods and is_tensor_val(first_value):
            view = first_value.view(strided=True)
            result = Val(
                view.storages,
                view.grad,
                call,
                True,
                hidden=view.hidden,
                multi_view=short,
                dtype=view.dtype,
                graph=view.graph,
            )
        if overload is None:
            return result
        bound = self.bind(overload.params, args)
        texts = self.argument_texts(overload.params, args)
        return self.i.record_op(short, label, bound, result, call, state, texts, facts=overload)

    def load_items(self, call: cst.Call, args: Args, state: State) -> None:
        """`DataLoader(dataset)` calls the dataset's `__getitem__` once per item and epoch, in this
        process unless workers (made anew each epoch) do it: what the accessor writes of the
        dataset's own tensors then stays written. It runs here, where the loader is built, for
        the findings it makes on its own; its writes are not applied to the caller's values."""
        workers = args.get("num_workers", 5)
        if isinstance(workers, Const) and workers.value and not literal_true(args.keywords.get("persistent_workers")):
            return
        for _, dataset in options_of(args.get("dataset", 0) or NOT_TENSOR):
            accessor = (
                self.i.engine.method_of(dataset.instance.cls, "__getitem__")
                if isinstance(dataset, Module) and dataset.instance is not None
                else None
            )
            if accessor is not None:
                index = Args(positional=[NOT_TENSOR], positional_exprs=[None])
                self.call_project(accessor, call, index, state, dataset, apply_writes=False)

    def result_of(self, name: str, facts: OpFacts | None, inputs: list[Value]) -> Val:
        """A fresh result; several tensors for `topk`/`max(dim)`, integer ones never requiring grad."""
        result = self.i.new_tensor(inputs)
        if facts is None or len(facts.outputs) < 2:
            return result
        integers = self.i.facts.integer_outputs.get(name, frozenset())
        items = tuple(
            Val(fresh_storage(), Grad.NO, dtype="int64") if output in integers else self.i.new_tensor(inputs)
            for output in facts.outputs
        )
        return Val(items=items)

    def asked_for(self, summary: Summary, write: ParamWrite, binding: Binding) -> bool:
        """Whether the callee's write sits on a path the call chose with a `True`/`False` literal."""
        flags = {name for name, expr in binding.exprs.items() if expr is not None and literal(expr) is not None}
        if not flags or summary.node is None or write.site.path != summary.path:
            return False
        # Walked once per function, not per call: torchvision's box conversions, called with
        # `inplace=True`, asked 1,014 times for one file.
        node = summary.node
        around = self.i.project.learn(
            ("if-tests", summary.path, id(node)), lambda: if_tests_around(node), lambda _: {summary.path}
        )
        return not around.get(id(write.site.node), frozenset()).isdisjoint(flags)

    def inplace_flag(self, short: str, args: Args) -> Condition | None:
        """The condition under which a functional's `inplace=` makes it write (None: never)."""
        index = self.i.facts.inplace_kwarg_functionals.get(short)
        if index is None:
            return None
        flag = args.get("inplace", index)
        if flag is None:
            return None
        condition = self.modules.truth_condition(flag, "inplace")
        if condition is None:
            return None
        conditions = self.i.facts.inplace_functional_conditions.get(short)
        if conditions is None:
            return condition
        params = self.i.facts.ops[short].params if short in self.i.facts.ops else ()
        for name, identity in conditions.identity.items():
            value = args.get(name, params.index(name) if name in params else None)
            part = self.modules.nonzero_condition(value, name, identity)
            if part is None:
                return None
            condition = condition | part
        if conditions.training_only:
            training = args.get("training", params.index("training") if "training" in params else None)
            if training is not None:
                part = self.modules.truth_condition(training, "training")
                if part is None:
                    return None
                condition = condition | part
        return condition

    def call_method(self, receiver: Val, method: str, call: cst.Call, args: Args, state: State) -> Value:
        target_expr = cast(cst.Attribute, call.func).value  # called for `receiver.method(...)`
        if receiver.opaque and method in _MAPPING_READERS:  # `grouped.values()` of an unseen helper's dict
            return self.opaque_result(args.prepend([receiver]), state)
        facts = self.i.facts
        if method in facts.inplace_methods or method in facts.inplace_view_methods:
            twin = facts.inplace_methods.get(method)
            others = self.bind(facts.ops[twin].params[1:], args) if twin is not None and twin in facts.ops else {}
            root = self.chain_root(call)
            self.i.inplace_op(
                Form.METHOD,
                call,
                target_expr if root is call else self.chain_target(call),
                receiver,
                state,
                f"`{self.i.ctx.code_of(root.func)}()` modifies",
                twin,
                f".{method}()",
                others,
                chain=root if root is not call else None,
            )
            if method in facts.inplace_view_methods:
                return receiver.view(strided=True)
            return receiver
        if method == "requires_grad_":
            enabled = args.get("requires_grad", 0)
            off = enabled is not None and isinstance(given := collapse(enabled), Const) and given.value is False
            grad = Grad.NO if off else Grad.LEAF
            updated = replace(receiver, grad=grad, origin=call)
            for name, value in list(state.env.items()):
                if isinstance(value, Val) and value.storages == receiver.storages and value.items is None:
                    state.env[name] = replace(value, grad=grad, origin=call)
            return updated
        if method == "detach":
            return receiver.detached("detach")
        if method in facts.view_methods:
            return receiver.view(method in NON_CONTIGUOUS_VIEWS, call if method in EXPANDING_VIEWS else None)
        if method in facts.multi_view_methods:
            view = receiver.view(strided=True)
            return Val(
                view.storages,
                view.grad,
                call,
                True,
                hidden=view.hidden,
                multi_view=method,
                dtype=view.dtype,
                graph=view.graph,
            )
        if method in NON_TENSOR_METHODS:
            if method == "backward":
                self.loop.backward(receiver, call, state)
            elif method == "register_hook":
                state.escaped |= receiver.graph
            return NOT_TENSOR
        if method.startswith("new_"):
            return Val(fresh_storage(), Grad.NO, origin=call, inference=self.i.inference)
        if method == "contiguous":
            return self.i.new_tensor([receiver]) if receiver.strided else receiver.view()
        if method == "clone":
            self.i.copied |= receiver.storages
            return replace(self.i.new_tensor([receiver]), cloned=True, origin=call)
        if method in _INTEGER_METHODS:
            return Val(fresh_storage(), Grad.NO, dtype=method, inference=self.i.inference)
        if method in _DTYPE_METHODS or method == "to":
            return self.convert(receiver, method, call, args)
        if method in ("cpu", "cuda"):
            return receiver.view()  # the same tensor when it is already on that device
        overload = facts.overload(method, [True, *(is_tensor(value) for value in args.positional)], list(args.keywords))
        result = self.result_of(method, overload, [receiver, *args.values()])
        if overload is not None:
            bound = {"self": receiver, **self.bind(overload.params[1:], args)}
            texts = {"self": self.i.ctx.code_of(target_expr), **self.argument_texts(overload.params[1:], args)}
            return self.i.record_op(method, f".{method}()", bound, result, call, state, texts, facts=overload)
        return result

    def chain_root(self, call: cst.Call) -> cst.Call:
        """`y.mul_(2).add_(1)`: the first in-place call of a chain of them on one tensor."""
        root = call
        while isinstance(root.func, cst.Attribute) and isinstance(root.func.value, cst.Call):
            inner = root.func.value
            if not (isinstance(inner.func, cst.Attribute) and inner.func.attr.value in self.i.facts.inplace_methods):
                break
            root = inner
        return root

    def chain_target(self, call: cst.Call) -> cst.BaseExpression:
        return cast(cst.Attribute, self.chain_root(call).func).value  # `receiver.method(...)`, as `call` is

    def convert(self, receiver: Val, method: str, call: cst.Call, args: Args) -> Val:
        """`.to(dtype)` returns `self` when the dtype already matches (autocast makes that common)."""
        dtype = _DTYPE_METHODS.get(method) or named_dtype(call)
        if dtype is not None and receiver.dtype == dtype:
            return receiver.view()
        if dtype is None and method == "to" and not _converts_dtype(call):
            return receiver.view()  # `.to(device)`: the same tensor when it is already there (CPU code)
        result = self.i.new_tensor([receiver, *args.values()])
        if dtype is not None and dtype.startswith(("int", "uint", "bool", "long")):
            return Val(result.storages, Grad.NO, result.origin, dtype=dtype)
        return replace(result, dtype=dtype)

    # ----------------------------------------------------------------- project code

    def call_autograd_function(self, owner: cst.BaseExpression, call: cst.Call, args: Args, state: State) -> Value:
        name = dotted(owner)
        info = self.i.project.resolve_class(self.i.ctx, name) if name is not None and args.tensors() else None
        forward = info.methods.get("forward") if info is not None and info.is_autograd_function else None
        if info is None or forward is None:
            return self.opaque_result(args, state)
        # Its writes are TIP005's business, reported inside `forward`.
        ref = FunctionRef(info.path, forward, info)
        return self.call_project(ref, call, args.prepend([NOT_TENSOR]), state, apply_writes=False)

    def call_project(
        self,
        ref: FunctionRef,
        call: cst.Call,
        args: Args,
        state: State,
        bound: Value | None = None,
        apply_writes: bool = True,
        closure: tuple[tuple[str, Value], ...] = (),
    ) -> Value:
        """A call into project code: run it with these arguments and apply what the run did."""
        run = self.i.engine.run(self.i, ref, args, bound, state, closure=closure)
        if run is None:
            return self.opaque_result(args, state, module_call=call if bound is not None else None)
        summary, binding = run
        self.i.children.append(summary)
        return self.apply_summary(summary, binding, ref, call, args, state, bound, apply_writes)

    def apply_summary(
        self,
        summary: Summary,
        binding: Binding,
        ref: FunctionRef,
        call: cst.Call,
        args: Args,
        state: State,
        bound: Value | None,
        apply_writes: bool,
    ) -> Value:
        values = list(binding.values.values())
        exprs = list(binding.exprs.get(name) for name in binding.values)
        label = self.i.ctx.code_of(call.func)
        state.hooked |= summary.hooked

        def resolve(slot: Slot) -> Value:
            if not slot or _argument(slot) >= len(values):
                return NOT_TENSOR
            value = values[_argument(slot)]
            for step in slot[1:]:
                value = collapse(value)
                if isinstance(value, DictVal):
                    value = value.get(step) or NOT_TENSOR
                elif isinstance(value, Module) and isinstance(step, str):
                    value = self.module_attribute(value, step)
                elif isinstance(value, Module) and isinstance(step, int) and value.items is not None:
                    value = value.items[step] if step < len(value.items) else NOT_TENSOR
                elif isinstance(value, Val) and value.items is not None and isinstance(step, int):
                    value = value.items[step] if step < len(value.items) else element_of(value)
                else:
                    return NOT_TENSOR
            return value

        # The callee ran on the instance's parameters and buffers; the object it was called on
        # names its own.
        owner = collapse(bound) if bound is not None else None
        own = owner.own_storages if isinstance(owner, Module) and not _same_self(owner, state) else _unchanged
        module_call = ref.node.name.value == "forward" and ref.cls is not None
        called = ref.node.name.value in ("forward", "__call__") and ref.cls is not None  # the object itself
        for write in summary.writes if apply_writes else ():
            value = collapse(resolve(write.slot))
            if not is_tensor_val(value):
                continue
            value = replace(value, storages=own(value.storages))
            if write.hidden is not None:
                value = value.detached(write.hidden)
            argument = exprs[_argument(write.slot)] if _argument(write.slot) < len(exprs) else None
            attribute = _attribute_written(write.slot, call, binding, argument, self.i.ctx, called)
            if attribute is not None:
                # The callee ran on the object itself and reported what the tensor is (a leaf, an
                # expanded view); here only what the caller did with it before the call counts.
                value = replace(value, grad=min(value.grad, Grad.MAYBE), expanded=None)
            condition = write.condition
            if write.via_activation:
                self.i.write(
                    Form.INPLACE_ACTIVATION,
                    call,
                    argument or call,
                    value,
                    state,
                    f"`{label}(...)` applies an inplace activation that rewrites",
                    hidden_from_reader=True,
                    site=write.site if write.site.path != self.i.ctx.path or write.related else None,
                    condition=condition,
                    calls=write.related,
                )
            else:
                # `normalize_(x)` as a statement, returning nothing or `x` itself, is called to
                # update `x`: reading `x` afterwards is intended. One that returns a new value
                # (`encode(mel)`) is called for that value, and changing `mel` is its side effect,
                # unless the call asked for it (`helper(x, functional=False)` takes the branch
                # that writes). A module is called for its output, whatever the statement does
                # with it: `fmask(spec)` (torchaudio's TimeMasking) is not asked to mask `spec`.
                new_tensors = [
                    tensor for tensor in tensors_in(summary.returned) if not tensor.storages <= summary.slots.keys()
                ]
                discarded = call is self.i.discarded and not new_tensors and not module_call
                updater = discarded or write.deliberate or self.asked_for(summary, write, binding)
                intended = names_read(argument) if argument is not None and updater else set()
                if attribute is not None and updater:
                    intended = {attribute}  # `self._dequeue_and_enqueue(k)` is called to update `self.queue`
                action = write.action if write.action.endswith(_CALLERS) else f"{write.action}{_CALLERS}"
                with self.i.modes():
                    self.i.grad_enabled = self.i.grad_enabled and write.grad_enabled  # the callee's mode at the write
                    # Read again, the values are wrong in any grad mode; but where nothing records,
                    # a write the callee's own callee did is taken for the update it asked for,
                    # unless the callee hands the written tensor back as its result (wav2aug's
                    # `aug = augmenter(wavs)`): the caller then holds it under two names; or
                    # the callee is a module, called for its output (SAM2's prompt encoder
                    # shifting the user's `input_boxes` two calls down).
                    stale_after = (
                        self.i.grad_enabled or not write.nested or module_call or _returns_slot(summary, write.slot)
                    )
                    self.i.write(
                        Form.ARGUMENT,
                        call,
                        argument or call,
                        value,
                        state,
                        action,
                        stale_after,
                        write.site,
                        intended,
                        condition=condition,
                        written=attribute
                        or (
                            _spread_entry(call, list(binding.values), _argument(write.slot))
                            if argument is None
                            else None
                        ),
                    )
            if value.storages & self.i.param_storages:
                state.escaped |= value.graph
        made: set[int] = set()
        renumbered: dict[int, int] = {}  # a callee save's order -> the caller's record of it
        if self.i.grad_enabled:
            graph_args = max((grad_of(value) for value in values), default=Grad.NO) > Grad.UNKNOWN
            for slot, records in summary.saves.items():
                value = collapse(resolve(slot))
                if is_tensor_val(value) and records:
                    expr = exprs[_argument(slot)] if slot and _argument(slot) < len(exprs) else None
                    text = (
                        self.i.ctx.code_of(expr)
                        if expr is not None
                        else (
                            summary.params[_argument(slot)]
                            if slot and _argument(slot) < len(summary.params)
                            else "its argument"
                        )
                    )
                    for inner in _per_condition(records):
                        certain = graph_args or inner.certain
                        order = self.i.save(
                            state, value, f"{label} (its `{inner.op}`)", text, call, certain, condition=inner.condition
                        ).order
                        made.add(order)
                        renumbered.update((r.order, order) for r in records if r.condition == inner.condition)
            for storages, inner in summary.stable_saves:
                order = self.i.save(
                    state,
                    NOT_TENSOR,
                    f"{label} (its `{inner.op}`)",
                    inner.what,
                    call,
                    inner.certain,
                    storages=own(storages),
                    condition=inner.condition,
                ).order
                made.add(order)
                renumbered[inner.order] = order
        mapping: dict[int, Val] = {}
        # What the callee's own tensors were computed from: the arguments as its parameters took
        # them (one typed `torch.LongTensor` brings no graph along).
        passed = Args(values, open=args.open)
        result = _made_at(self.materialize(summary.returned, summary, resolve, mapping, passed, state), call)
        if isinstance(result, Func) and result.closure and is_project_object(bound):
            result = _closing_over(result, bound)
        enclosed_self = (
            binding.values.get("self") if bound is None and binding.exprs.get("self", call) is None else None
        )
        if summary.self_updates and (bound is not None or is_project_object(enclosed_self)):
            # What the callee only read is the caller's already: `self.valid(self.trainModel)`
            # in an epoch loop hands back the very model, not a new one each round.
            attrs = bound.instance.attrs if isinstance(bound, Module) and bound.instance is not None else {}
            here = bound is not None and _same_self(bound, state)  # this run's `self.<name>` first

            def had(name: str) -> Value | None:
                return state.env.get(f"self.{name}", attrs.get(name)) if here else attrs.get(name)

            updates = {
                name: self.materialize(value, summary, resolve, mapping, passed, state)
                for name, value in summary.self_updates.items()
                if had(name) != value
            }
            if bound is None:
                self.update_enclosed(cast(Module, enclosed_self), updates, state)
            elif _same_self(bound, state):
                state.env.update((f"self.{name}", value) for name, value in updates.items())
                for name, kept in summary.self_stale.items():
                    state.stale.setdefault(f"self.{name}", kept)
            else:
                self.update_receiver(bound, call, updates, state)
        for name, (value, pending) in summary.outer.items():
            filled = self.materialize(value, summary, resolve, mapping, passed, state)
            if isinstance(filled, (Val, DictVal)):
                filled = replace(filled, cell=getattr(value, "cell", None))
            self.hand_back(name, filled, pending, mapping, state)
        for slot, value in summary.cell_updates.items():
            old = resolve(slot)
            expr = exprs[_argument(slot)] if slot and _argument(slot) < len(exprs) else None
            if isinstance(value, Module):
                if expr is not None and len(slot) == 1:
                    self.i.rebind_container(expr, old, value, state)  # a ModuleList the callee grew
                continue
            if expr is not None and len(slot) == 1:
                self.i.rebind_container(
                    expr,
                    old,
                    replace(
                        # a list or dict the callee filled
                        cast("Val | DictVal", self.materialize(value, summary, resolve, mapping, passed, state)),
                        cell=getattr(collapse(old), "cell", None),
                    ),
                    state,
                )
        if self.i.grad_enabled:
            for storage, records in summary.result_saves.items():
                tensor = mapping.get(storage)
                if tensor is None or not records:
                    continue
                for inner in _per_condition(records):
                    order = self.i.save(
                        state,
                        tensor,
                        f"{label} (its `{inner.op}`)",
                        "its result",
                        call,
                        tensor.grad > Grad.UNKNOWN or inner.certain,
                        condition=inner.condition,
                    ).order
                    made.add(order)
                    renumbered.update((r.order, order) for r in records if r.condition == inner.condition)
        if made and self.i.grad_enabled:
            result = _with_callee_graph(result, summary.returned, renumbered, frozenset(made))
        self.replay_training(summary, own, resolve, exprs, call, state)
        return self.i.defer(summary.deferred, result)

    def replay_training(
        self,
        summary: Summary,
        own: Callable[[frozenset[int]], frozenset[int]],
        resolve: Callable[[Slot], Value],
        exprs: list[cst.BaseExpression | None],
        call: cst.Call,
        state: State,
    ) -> None:
        """The callee's optimizer steps and its backwards through what this run passed it, in
        order: a step there rewrites parameters a loss built here saved (EdgeConnect's
        `self.edge_model.backward(gen_loss, dis_loss)` steps the discriminator between them)."""
        for event in summary.training:
            if isinstance(event, Step):
                storages = own(event.storages) if event.storages is not None else None
                condition = event.condition | state.condition
                self.loop.take(replace(event, order=next_order(), storages=storages, condition=condition), state)
                continue
            index = _argument(event.slot)
            expr = exprs[index] if index < len(exprs) else None
            text = self.i.ctx.code_of(expr) if expr is not None and len(event.slot) == 1 else None
            self.loop.backward(resolve(event.slot), call, state, retain=event.retain, loss_text=text)

    def hand_back(
        self, name: str, value: Value, pending: PendingWrite | None, mapping: dict[int, Val], state: State
    ) -> None:
        """A list or dict of another scope that a callee filled (`Summary.outer`): its owner's
        names (same cell) see what it holds now, and stale if a hidden write rewrote it since.
        An attribute of an object no name held where it changed (`object_slot`) is its holders'
        `<name>.<attribute>` here, and still handed up for holders further out."""
        self.i.rebind_named(name, value, value, state)
        owners = {name}
        plain = name.removeprefix(OUTER)
        ident, _, attr = plain.partition(".")
        by_object = bool(attr) and ident.startswith("#")
        if by_object:
            holders = [f"{other}.{attr}" for other, held in state.env.items() if is_object(held, ident)]
            state.env.update(dict.fromkeys(holders, value))
            owners.update(holders)
        elif (
            self.i.recorder is None
            and isinstance(value, (Val, DictVal))
            and is_container(state.env.get(plain, NOT_TENSOR))
        ):
            # Module-level code holds the module's own dict under its name (`activation = {}`),
            # evaluated apart from the value functions read: the same dict.
            state.env[plain] = replace(value, cell=getattr(state.env[plain], "cell", None))
            owners.add(plain)
        if pending is None:
            return
        held = frozenset().union(*(mapping[storage].storages for storage in pending.held if storage in mapping))
        cell = getattr(value, "cell", None)
        for other, kept in state.env.items():
            if other in owners or (cell is not None and getattr(kept, "cell", None) == cell):
                state.stale.setdefault(other, replace(pending, held=held or pending.held))

    def update_receiver(self, bound: Value, call: cst.Call, updates: dict[str, Value], state: State) -> None:
        """`registry.register_module(module=nn.ReLU)`, `memory.create_tensor(...)`, `saver(...)`:
        what a method bound to `self` is the caller's object afterwards, where the caller holds it
        by a name. The instance is copied, not changed: the memo shares one among the sites that
        build it alike. An object no name holds here (a forward hook's, called inside the model)
        hands the tensors its attributes took up to the callers that hold it (`object_slot`)."""
        if not isinstance(bound, Module) or bound.instance is None:
            return
        called = dotted(call.func)  # `saver(...)`: the object itself
        receiver = dotted(call.func.value) if isinstance(call.func, cst.Attribute) else None
        attrs = bound.instance.attrs
        for owner in (called, receiver):
            if owner is None:
                continue
            # a module-level name (`ACTIVATION_LAYERS`) is the caller's from now on
            held = state.env.get(owner, bound if "." not in owner and owner != called else None)
            if not isinstance(held, Module) or (held.instance is not bound.instance and held.ident != bound.ident):
                continue
            if not all(name in attrs and attrs[name] == value for name, value in updates.items()):
                state.env[owner] = _with_attrs(held, updates)
            for name in updates:
                state.env.pop(f"{owner}.{name}", None)  # what this run bound before the call is older now
            return
        self.hand_up(bound, updates, state)

    def update_enclosed(self, held: Module, updates: dict[str, Value], state: State) -> None:
        """`_register`, the function `register_module()` hands a class decorator: what a nested
        function does to its method's `self` is done to that object wherever the caller holds it;
        where nothing here holds it (a hook a method made, run inside the model), up to the
        callers that do."""
        changed = _with_attrs(held, updates)
        holders = [name for name, value in state.env.items() if isinstance(value, Module) and value.ident == held.ident]
        for name in holders:
            state.env[name] = changed
        if not holders:
            self.hand_up(held, updates, state)

    def hand_up(self, held: Module, updates: dict[str, Value], state: State) -> None:
        """The attributes a method changed, of an object no name holds here, that hold tensors:
        kept under `object_slot` for the callers holding the object (`hand_back`)."""
        for name, value in updates.items():
            if tensors_in(value):
                state.env[object_slot(held, name)] = value

    def materialize(
        self,
        value: Value | None,
        summary: Summary,
        resolve: Callable[[Slot], Value],
        mapping: dict[int, Val],
        args: Args,
        state: State,
    ) -> Value:
        """A callee's value in the caller's terms: its arguments' tensors are the caller's, the
        tensors it made are fresh ones (the same one for the same callee tensor)."""
        if value is None:
            return self.opaque_result(args, state) if args.tensors() else NOT_TENSOR
        if isinstance(value, Choice):
            return Choice(
                tuple(
                    (condition, self.materialize(option, summary, resolve, mapping, args, state))
                    for condition, option in value.options
                )
            )
        if isinstance(value, DictVal):
            entries = tuple(
                (key, self.materialize(item, summary, resolve, mapping, args, state)) for key, item in value.entries
            )
            rest = (
                self.materialize(value.rest, summary, resolve, mapping, args, state) if value.rest is not None else None
            )
            return DictVal(entries, rest, _caller_cell(value.cell, summary, resolve))
        if isinstance(value, Func) and value.closure:
            # A nested function handed out (`get_activation(name)` returning its hook): the dicts
            # and lists it fills are the caller's, the one passed in being the caller's own.
            closure = tuple(
                (name, self.materialize(item, summary, resolve, mapping, args, state)) for name, item in value.closure
            )
            return replace(value, closure=closure)
        if isinstance(value, (Module, Optimizer, Params)):
            again = isinstance(value, Module) and id(value) in self.handed_out
            self.handed_out[id(value)] = value
            value = _made_anew(value, summary, mapping, resolve, again)
        if isinstance(value, Module) and value.config:
            config = tuple(
                (name, self.materialize(item, summary, resolve, mapping, args, state)) for name, item in value.config
            )
            return replace(value, config=config)
        if not isinstance(value, Val):
            return value
        items = (
            tuple(self.materialize(item, summary, resolve, mapping, args, state) for item in value.items)
            if value.items is not None
            else None
        )
        if not value.is_tensor:
            return (
                replace(value, items=items, cell=_caller_cell(value.cell, summary, resolve))
                if items is not None
                else value
            )
        slots = [summary.slots[storage] for storage in value.storages if storage in summary.slots]
        if slots:
            aliases = [collapse(resolve(slot)) for slot in slots]
            tensors = [alias for alias in aliases if is_tensor_val(alias)]
            if tensors:
                merged = cast(Val, merge_all(tensor.view() for tensor in tensors))  # tensors merge into a tensor
                return replace(merged, items=items) if items is not None else merged
        fresh = mapping.get(min(value.storages))
        if fresh is None:
            grad = value.grad if self.i.grad_enabled else Grad.NO
            passed = args.values()
            if summary.arg_tokens and len(summary.arg_tokens) == len(passed):
                passed = [item for item, token in zip(passed, summary.arg_tokens, strict=True) if token in value.graph]
            graph = graph_of(Val(items=tuple(passed))) if grad is not Grad.NO else frozenset()
            fresh = Val(
                fresh_storage(),
                grad,
                dtype=value.dtype,
                opaque=value.opaque,
                graph=graph,
                inference=self.i.inference or value.inference,  # made under the callee's inference_mode
                multi_view=value.multi_view,
                origin=value.origin,
            )
            for storage in value.storages:
                mapping[storage] = fresh
        return replace(fresh, items=items) if items is not None else fresh

    def opaque_result(self, args: Args, state: State, module_call: cst.Call | None = None) -> Value:
        """What a call into code we cannot see returns: a tensor (or tuple of them) made from its
        inputs. The graph it leaves through may hold parameters (an unknown module's, called at
        `module_call`): a record stands for them, so that a step between two backwards through it
        is seen, and names that call as where the loss was computed."""
        tensors = args.tensors()
        if not tensors:
            return NOT_TENSOR
        result = self.i.new_tensor(tensors)
        state.escaped |= graph_of(Val(items=tuple(args.values())))
        if module_call is not None and self.i.grad_enabled:
            record = self.i.save(state, NOT_TENSOR, "a module", "its parameters", module_call, storages=fresh_storage())
            result = replace(result, graph=result.graph | {record.order})
        return replace(result, opaque=True)

    def bind(self, params: Sequence[str], args: Args) -> dict[str, Value]:
        """Arguments by parameter name, keywords and positionals in order. A tensor-list
        parameter given tensors one by one (`torch.einsum(eq, a, b)`) takes them all."""
        bound = {name: value for name, value in zip(params, args.positional, strict=False)}
        if "tensors" in params:
            index = list(params).index("tensors")
            if index < len(args.positional) and is_tensor(args.positional[index]):
                bound["tensors"] = Val(items=tuple(args.positional[index:]))
                for name in params[index + 1 :]:
                    bound.pop(name, None)
        for name, value in args.keywords.items():
            if name in params:
                bound[name] = value
        return {name: collapse(value) for name, value in bound.items()}

    def argument_texts(self, params: Sequence[str], args: Args) -> dict[str, str]:
        texts = {}
        for name, expr in zip(params, args.positional_exprs, strict=False):
            if expr is not None:
                texts[name] = self.i.ctx.code_of(expr)
        for name, expr in args.keyword_exprs.items():
            if expr is not None and name in params:
                texts[name] = self.i.ctx.code_of(expr)
        return texts


_LOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})


def _options_apart(choice: Choice, site: object) -> tuple[tuple[Condition, Value], ...]:
    """The options of `choice`, each with a condition no other option's is consistent with: as
    they are where their conditions already exclude each other, else each with `option@site ==
    i` added (the site's identity keeps it the same each time the call is evaluated)."""
    options = choice.options
    if all(not consistent(a | b) for index, (a, _) in enumerate(options) for b, _ in options[index + 1 :]):
        return options
    subject = f"{OPTION}@{id(site)}"
    return tuple(
        (condition | {Assumption(subject, f"== {index}", True)}, option)
        for index, (condition, option) in enumerate(options)
    )


def _converts_dtype(call: cst.Call) -> bool:
    """`image.to(dtype)`, `x.to(dtype=target_dtype)`: a conversion to a dtype named but not known
    here, which copies unless it is the tensor's own (torchvision's `to_dtype` converts an integer
    image to float, then scales the copy in place)."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "dtype":
            return True
        if arg.keyword is None and type(arg.value) is cst.Name and arg.value.value.endswith("dtype"):
            return True
    return False


def _sequence(name: str, value: Value) -> Value:
    """`list(value)` or `tuple(value)` of one value (not a `Choice`)."""
    cell = fresh_id() if name == "list" else None
    if isinstance(value, (Val, Module)) and value.items is not None and not is_tensor(value):
        return Val(items=tuple(value.items), cell=cell)
    if isinstance(value, Params) or is_tensor(value):
        return Val(items=(element_of(value),), cell=cell)
    return Val(items=(element_of(value),), cell=fresh_id()) if element_of(value) is not NOT_TENSOR else NOT_TENSOR


def _argument(slot: Slot) -> int:
    """The argument a (non-empty) slot starts at: its first element is that argument's index."""
    return cast(int, slot[0])


def _with_callee_graph(value: Value, callee: Value | None, renumbered: dict[int, int], made: frozenset[int]) -> Value:
    """The call's result with, for each tensor, the callee's saves it went through there
    (`return outputs, gen_loss, dis_loss`: each loss its own graph, so that backward of one
    frees only its own). A tensor whose saves are not known takes all the call made."""
    if isinstance(value, Val) and isinstance(callee, Val):
        if value.items is not None and callee.items is not None and len(value.items) == len(callee.items):
            items = tuple(
                _with_callee_graph(v, c, renumbered, made) for v, c in zip(value.items, callee.items, strict=True)
            )
            value = replace(value, items=items)
            if not value.is_tensor:
                return value
        if value.is_tensor and value.items is None:
            own = frozenset(renumbered[order] for order in callee.graph if order in renumbered)
            return with_graph(value, own or made)
    if isinstance(value, DictVal) and isinstance(callee, DictVal) and len(value.entries) == len(callee.entries):
        entries = tuple(
            (key, _with_callee_graph(item, other, renumbered, made))
            for (key, item), (_, other) in zip(value.entries, callee.entries, strict=True)
        )
        rest = value.rest
        return replace(value, entries=entries, rest=with_graph(rest, made) if rest is not None else None)
    return with_graph(value, made)


def _unchanged(storages: frozenset[int]) -> frozenset[int]:
    return storages


def _made_at(value: Value, call: cst.Call) -> Value:
    """An inference tensor a callee made under its `@torch.inference_mode()` is, for the caller,
    made at the call (where the finding says it was created)."""
    if isinstance(value, Val) and value.items is not None:
        return replace(value, items=tuple(_made_at(item, call) for item in value.items))
    if isinstance(value, Val) and value.inference and value.origin is None:
        return replace(value, origin=call)
    return value


def _per_condition(records: Iterable[SaveRecord]) -> list[SaveRecord]:
    """The first save of each condition a callee saved under (each option of a configuration)."""
    first: dict[Condition, SaveRecord] = {}
    for record in sorted(records, key=lambda record: record.order):
        first.setdefault(record.condition, record)
    return list(first.values())


def _named(params: Params) -> Val:
    """`named_parameters()`: (name, parameter) pairs."""
    return Val(items=(Val(items=(NOT_TENSOR, element_of(params))),))


def _elements(expr: cst.BaseExpression | None) -> list[cst.BaseExpression] | None:
    """The element expressions of a tuple or list display (`(q, k, v)`)."""
    if isinstance(expr, (cst.Tuple, cst.List)) and not any(isinstance(e, cst.StarredElement) for e in expr.elements):
        return [element.value for element in expr.elements]
    return None


def _made_anew(
    value: Value, summary: Summary, mapping: dict[int, Val], resolve: Callable[[Slot], Value], again: bool
) -> Value:
    """A module the callee built, not one it was handed, is a new object when the caller gets it
    `again` from the same run: a factory lambda called for two Q-networks gives two networks
    with their own parameters, though the memo ran it once. (The first one stays the run's own
    object, which later runs handed it share in the memo.) Each parameter storage is renamed
    once per call (`mapping`, which the returned tensors share), so that a module, its layers
    and the optimizers built over them still agree; an optimizer or `parameters()` over a
    module the callee was handed is over the caller's module (`value_optimizer_fn(net)`)."""

    def new(storage: int) -> frozenset[int]:
        slot = summary.slots.get(storage)
        if slot is not None:
            return reachable(resolve(slot)) or frozenset((storage,))
        if storage in summary.module_slots:
            index, rank = summary.module_slots[storage]
            given = sorted(reachable(resolve((index,))))
            return frozenset((given[rank],)) if rank < len(given) else frozenset((storage,))
        fresh = mapping.get(storage)
        if fresh is None and again:
            fresh = mapping[storage] = Val(fresh_storage(), Grad.LEAF)
        return fresh.storages if fresh is not None else frozenset((storage,))

    def renamed(storages: frozenset[int]) -> frozenset[int]:
        return frozenset().union(*map(new, storages))

    if isinstance(value, (Optimizer, Params)):
        return replace(value, storages=renamed(value.storages)) if value.storages else value
    if (
        not again
        or not isinstance(value, Module)
        or not value.params
        or value.params & (summary.slots.keys() | summary.module_slots.keys())
        or (value.instance is not None and not value.renamed)
    ):
        return value
    if value.instance is not None:
        pairs = tuple((inner, min(new(outer))) for inner, outer in value.renamed)
        params = frozenset(n for (_, outer), (_, n) in zip(value.renamed, pairs, strict=True) if outer in value.params)
        return replace(value, ident=fresh_id(), params=params, renamed=pairs)
    items = (
        tuple(_made_anew(item, summary, mapping, resolve, again) for item in value.items)
        if value.items is not None
        else None
    )
    return replace(value, ident=fresh_id(), params=renamed(value.params), items=items)


def _declared_value(annotation: cst.BaseExpression, call: cst.Call) -> Value | None:
    """A value of a declared type: a tensor for `Tensor` (optional or not), a tuple of them for
    `Tuple[...]`; None for any other type."""
    if is_tensor_annotation(cst.Annotation(annotation)):
        return Val(fresh_storage(), Grad.UNKNOWN, origin=call)
    if isinstance(annotation, cst.Subscript) and dotted(annotation.value) in ("Tuple", "tuple", "typing.Tuple"):
        items = [
            _declared_value(element.slice.value, call) if isinstance(element.slice, cst.Index) else None
            for element in annotation.slice
        ]
        return Val(items=tuple(item if item is not None else NOT_TENSOR for item in items))
    return None


def _caller_cell(cell: int | None, summary: Summary, resolve: Callable[[Slot], Value]) -> int | None:
    """A callee's list or dict in the caller's terms: the caller's own where it was passed in
    (what a hook the callee made fills is the caller's `activation`), else a new one."""
    if cell is None:
        return None
    slot = summary.cells.get(cell)
    own = getattr(collapse(resolve(slot)), "cell", None) if slot is not None else None
    return own if own is not None else fresh_id()


def _attribute_written(
    slot: Slot,
    call: cst.Call,
    binding: Binding,
    argument: cst.BaseExpression | None,
    ctx: FileContext,
    called: bool,
) -> str | None:
    """A callee's write into an attribute of an object it was given, as the caller's code:
    `self.queue` for `self._dequeue_and_enqueue(k)`, `memory.bank` for `update(memory, x)`,
    `net.fc_val[2].epsilon_weight` for `net(x)`."""
    params = list(binding.values)
    if len(slot) < 2 or not isinstance(slot[-1], str) or _argument(slot) >= len(params):
        return None
    if not isinstance(collapse(binding.values[params[_argument(slot)]]), Module):
        return None  # an entry of a dict
    if argument is not None:
        owner = ctx.code_of(argument)
    elif _argument(slot) == 0 and called:
        owner = ctx.code_of(call.func)  # the module or callable object called
    elif _argument(slot) == 0 and isinstance(call.func, cst.Attribute):
        owner = ctx.code_of(call.func.value)  # the object the method was called on
    else:
        owner = params[_argument(slot)]
    return owner + "".join(f".{step}" if isinstance(step, str) else f"[{step}]" for step in slot[1:])


def _spread_entry(call: cst.Call, params: list[str], index: int) -> str | None:
    """An argument taken from a dict spread into the call, as code: `inputs["input_boxes"]`."""
    spread = spread_names(call, ("**",))
    if not spread or index >= len(params):
        return None
    return f'{spread[0]}["{params[index]}"]'


def _callable(value: Value | None) -> bool:
    return value is not None and all(isinstance(option, _CALLABLE_VALUES) for _, option in options_of(value))


def _unbound_method(ref: FunctionRef) -> bool:
    """A method taken from its class, not from an object: the caller passes `self` first."""
    return ref.cls is not None and not ref.is_static and not ref.is_classmethod


def _placeholder(attr: Value | None) -> bool:
    """An attribute `__init__` did not set, or set to None for a later method to fill."""
    return attr is None or attr == Const(None)


def _with_attrs(held: Module, updates: dict[str, Value]) -> Module:
    """`held`, a project object, with the attributes the updates changed: its instance is
    copied, not changed, since the memo shares one among the sites that build it alike."""
    instance = cast(Instance, held.instance)
    return replace(held, instance=replace(instance, attrs={**instance.attrs, **updates}))


def _closing_over(func: Func, bound: Module) -> Func:
    """A nested function a method returned, closing over the caller's object rather than the
    one the memoised run was given: objects built alike share one run, not one identity."""
    closure = tuple(
        (name, bound if isinstance(value, Module) and value.instance is bound.instance else value)
        for name, value in func.closure
    )
    return replace(func, closure=closure)


def _same_self(bound: Value, state: State) -> bool:
    return bound is state.env.get("self") or (
        isinstance(bound, Module)
        and isinstance(own := state.env.get("self"), Module)
        and bound.instance is own.instance
    )


def _is_namespace(value: Value) -> bool:
    return isinstance(value, Namespace)


def _string_method(text: str, method: str, args: Args) -> Value:
    """A string method on a constant with constant arguments, computed as Python would: a
    factory's `name.replace('_', '').lower().split('-')[0]` names one layer of its table."""
    positional = [_python_constant(value) for value in args.positional]
    keywords = {name: _python_constant(value) for name, value in args.keywords.items()}
    if method not in _PURE_STRING_METHODS or _UNKNOWN in positional or _UNKNOWN in keywords.values():
        return NOT_TENSOR
    if method == "format" and not _plain_format(text):
        return NOT_TENSOR
    try:
        result = getattr(text, method)(*positional, **keywords)
    except (TypeError, ValueError, LookupError, AttributeError):  # `"{missing}".format()`
        return NOT_TENSOR
    if method in _BUILDING_METHODS and not (isinstance(result, str) and _CODE_LIKE.fullmatch(result)):
        # a name the code builds (`"Encoder{}".format(kind)`, `"conv{}".format(i)`) is looked up,
        # and code it builds to `eval` (`'self._encoder.{}.register_forward_hook(h)'.format(layer)`)
        # run; a message is not, and known it would only tell apart runs of a logger (timm: +20%)
        return NOT_TENSOR
    if isinstance(result, list):
        return Val(items=tuple(Const(part) for part in result), cell=fresh_id())
    if isinstance(result, tuple):
        return Val(items=tuple(Const(part) for part in result))
    return Const(result)


_UNKNOWN = object()
# A name, a dotted path, or a call or subscript on one, without spaces: what code builds to look
# up or evaluate, unlike a message.
_CODE_LIKE = re.compile(r"[A-Za-z_][\w.\[\]()'\",]*")
_LARGE_WIDTH = re.compile(r"\d{4}")


def _plain_format(text: str) -> bool:
    """A format string whose fields cannot build a huge string (`"{:>999999999}"`, or a width
    taken from an argument, `"{:{width}}"`)."""
    try:
        return not any(
            spec and ("{" in spec or _LARGE_WIDTH.search(spec)) for _, _, spec, _ in string.Formatter().parse(text)
        )
    except ValueError:
        return False


def _python_constant(value: Value) -> object:
    """A string method's argument as Python holds it: a constant, or a tuple of constants
    (`startswith(("a", "b"))`); `_UNKNOWN` otherwise."""
    value = collapse(value)
    if isinstance(value, Const) and isinstance(value.value, (str, int, type(None))):
        return value.value
    if isinstance(value, Val) and value.items is not None and value.cell is None and not value.is_tensor:
        parts = tuple(_python_constant(item) for item in value.items)
        return _UNKNOWN if _UNKNOWN in parts else parts
    return _UNKNOWN


# `str` methods that compute from the string and their arguments alone.
_PURE_STRING_METHODS = frozenset(
    {
        "lower", "upper", "casefold", "capitalize", "title", "swapcase",
        "strip", "lstrip", "rstrip", "removeprefix", "removesuffix", "replace",
        "split", "rsplit", "partition", "rpartition", "splitlines",
        "startswith", "endswith", "find", "rfind", "count",
        "isdigit", "isalpha", "isalnum", "isnumeric", "isdecimal", "islower", "isupper", "isidentifier",
        "format", "join",
    }
)  # fmt: skip
_BUILDING_METHODS = frozenset({"format", "join"})


def literal_true(value: Value | None) -> bool:
    return isinstance(value, Const) and value.value is True


def dtype_name(expr: cst.BaseExpression) -> str | None:
    """`torch.bfloat16` -> "bfloat16"; anything that is not a dtype attribute -> None."""
    name = dotted(expr)
    if name is None or not name.startswith(("torch.", "th.")):
        return None
    short = name.rsplit(".", 1)[-1]
    return (
        {"float": "float32", "half": "float16", "double": "float64"}.get(short, short)
        if short[:1].islower()
        and any(c.isdigit() for c in short)
        or short in ("float", "half", "double", "bfloat16", "long", "int", "bool")
        else None
    )


def named_dtype(call: cst.Call) -> str | None:
    """The dtype a call names among its arguments (`.to(torch.bfloat16)`, `dtype=torch.float32`)."""
    return next((name for arg in call.args if (name := dtype_name(arg.value))), None)


def _returns_slot(summary: Summary, slot: Slot) -> bool:
    """Whether the callee returns (among its results) the tensor it was handed at `slot`."""
    handed = {storage for storage, held in summary.slots.items() if held == slot}
    return any(tensor.storages & handed for tensor in tensors_in(summary.returned))


def _sizes_only(args: Args) -> bool:
    """`torch.Tensor(3, 4)` (memory to fill), not `torch.Tensor(box)` (a list's values)."""
    return all(isinstance(value, Const) and type(value.value) is int for value in args.positional)


def _range(args: Args) -> Value:
    """`range(...)` of known bounds yields its few numbers (`for i in range(3): act(inplace=i > 0)`
    builds one out-of-place module and two in-place ones); else numbers not known."""
    bounds = [collapse(value) for value in args.positional]
    if bounds and all(isinstance(bound, Const) and type(bound.value) is int for bound in bounds) and len(bounds) <= 3:
        numbers = range(*(bound.value for bound in bounds if isinstance(bound, Const) and type(bound.value) is int))
        if len(numbers) <= _MAX_RANGE:
            return Val(items=tuple(Const(number) for number in numbers))
    return NOT_TENSOR


def _counted(container: Value) -> Value:
    """`len()` of a module container whose every child was added under its own known name
    (`add_module(f"act{i + 1}", ...)` in a loop of known rounds): its number of children. Other
    lengths are not known: a list grown by a loop of unknown rounds holds two rounds' items."""
    if isinstance(container, Module) and container.items is not None and container.keys is not None:
        names = container.keys
        if len(names) == len(container.items) and "*" not in names and len(set(names)) == len(names):
            return Const(len(names))
    return NOT_TENSOR
