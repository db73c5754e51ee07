"""How the interpreter evaluates a call: torch ops, tensor methods, nn modules, project code.

Each kind of callee says what it does to the tensors it is given — an in-place write, a save
for backward, a view or a fresh tensor — using the op table generated from torch for torch's
own callees and the callee's summary for project code.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import libcst as cst

from .classes import ClassInfo
from .imports import dotted
from .model import Form
from .project import FileContext
from .summaries import Summary
from .hazards import Hazard, step_reason
from .syntax import is_self, keyword_of, literal, names_read
from .values import NOT_TENSOR, Grad, ModuleRef, SaveRecord, Site, State, Val, Value, fresh_storage, grad_of, is_tensor
from .vocabulary import NON_CONTIGUOUS_VIEWS, NON_TENSOR_METHODS, SAFE_INPLACE_PREFIXES

_DTYPE_METHODS = {"float": "float32", "double": "float64", "half": "float16", "bfloat16": "bfloat16"}
_TORCH_NAMESPACES = frozenset({"torch", "torch.nn.functional", "torch.special", "torch.linalg", "torch.fft"})
_FUNCTIONAL = "torch.nn.functional"
_CALLERS = " the caller's"


class CallEvaluator:
    """The call half of `FunctionInterpreter` (see interpreter.py for the state it works on)."""

    def eval_call(self, call: cst.Call, state: State) -> Value:
        func = call.func
        args = [self.eval(arg.value, state) for arg in call.args]
        qualname = self.ctx.imports.qualname(func)
        if qualname is not None and qualname.startswith("torch."):
            return self.call_torch(qualname, call, args, state)
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if is_self(func.value) or dotted(func) in state.env:
                callee = self.eval_attribute(func, state)
                if isinstance(callee, ModuleRef):
                    return self.call_module(callee, call, args, state)
            receiver = self.eval(func.value, state)
            if is_tensor(receiver):
                return self.call_method(receiver, method, call, args, state)
            self.training_loop_call(method, call, state)
            if self.contract is not None and isinstance(func.value, cst.Name) and func.value.value == self.ctx_name:
                self.contract.on_ctx_call(method, call, args, state)
                return NOT_TENSOR
            if is_self(func.value) and self.cls is not None and method in self.cls.methods:
                return self.call_project(self.ctx, self.cls.methods[method], self.cls, call, args, state)
            if method == "apply":
                return self.call_autograd_function(func.value, call, args, state)
            if is_self(func.value):
                # A submodule or method of this class whose definition is not known here.
                return self.opaque_result(args)
            return NOT_TENSOR
        callee = self.eval(func, state)
        if isinstance(callee, ModuleRef):
            return self.call_module(callee, call, args, state)
        name = dotted(func)
        if name is not None and name not in state.env and any(map(is_tensor, args)):
            found = self.project.resolve_function(self.ctx, name)
            if found is not None:
                return self.call_project(found[0], found[1], None, call, args, state)
        return NOT_TENSOR

    def call_torch(self, qualname: str, call: cst.Call, args: list[Value], state: State) -> Value:
        if qualname.startswith(SAFE_INPLACE_PREFIXES):
            return NOT_TENSOR
        if qualname == "torch.nn.Parameter":
            return Val(fresh_storage(), Grad.LEAF, origin=call)
        if qualname == "torch.autograd.backward":
            self.training_loop_call("backward", call, state)
            return NOT_TENSOR
        short = qualname.rsplit(".", 1)[-1]
        namespace = qualname[: -len(short) - 1]
        if namespace not in _TORCH_NAMESPACES:
            return NOT_TENSOR
        if namespace == "torch" and self.facts.is_factory(short):
            requires_grad = any(keyword_of(arg) == "requires_grad" and literal(arg.value) for arg in call.args)
            if requires_grad and self.grad_enabled:
                return Val(fresh_storage(), Grad.LEAF, origin=call)
            return Val(fresh_storage(), Grad.NO, origin=call, fresh_buffer=True)
        tensors = [arg for arg in args if is_tensor(arg)]
        if not tensors or (namespace == "torch" and short not in self.facts.tensor_functions and short not in self.facts.ops):
            return NOT_TENSOR
        label = self.ctx.code_of(call.func)
        first = call.args[0].value if call.args else call
        twin = self.facts.inplace_functions.get(short) if namespace in ("torch", _FUNCTIONAL) else None
        if twin is not None or (namespace == _FUNCTIONAL and self.inplace_flag(short, call)):
            # torch.relu_(x), F.relu(x, inplace=True): rewrites its input
            target = args[0] if args and is_tensor(args[0]) else tensors[0]
            self.write(Form.INPLACE_ACTIVATION, call, first, target, state, f"`{label}(...)` rewrites", hidden_from_reader=True)
            saved = self.facts.inplace_function_saves.get(short)
            if saved is None:  # not probed: fall back to what the out-of-place twin saves
                self.record_op(twin or short, label, {"self": target}, target, call, state, {}, only=lambda kind: kind == "result")
            elif "result" in saved and self.grad_enabled and target.grad > Grad.NO:
                state.add_save(target, SaveRecord(label, "its result", call, certain=target.grad > Grad.UNKNOWN))
            return target
        out = next((value for arg, value in zip(call.args, args) if keyword_of(arg) == "out"), None)
        if is_tensor(out):
            out_expr = next(arg.value for arg in call.args if keyword_of(arg) == "out")
            self.write(Form.OUT_ARGUMENT, call, out_expr, out, state, f"`{label}(..., out=...)` writes into")
            return out
        result = self.new_tensor(tensors)
        if short in self.facts.view_methods and args and is_tensor(args[0]):
            result = args[0].view(strided=short in NON_CONTIGUOUS_VIEWS)
        bound = self.bind(short, call, args)
        self.record_op(short, label, bound, result, call, state, _argument_texts(self.ctx, call, self.facts.ops[short].params if short in self.facts.ops else ()))
        return result

    def inplace_flag(self, short: str, call: cst.Call) -> bool:
        index = self.facts.inplace_kwarg_functionals.get(short)
        if index is None:
            return False
        positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
        for arg in call.args:
            if keyword_of(arg) == "inplace":
                return bool(literal(arg.value))
        return index < len(positional) and bool(literal(positional[index].value))

    def call_method(self, receiver: Val, method: str, call: cst.Call, args: list[Value], state: State) -> Value:
        target_expr = call.func.value  # type: ignore[attr-defined]
        if method in self.facts.inplace_methods:
            twin = self.facts.inplace_methods[method]
            others = self.bind(twin, call, args, skip=1) if twin is not None else {}
            self.inplace_op(Form.METHOD, call, target_expr, receiver, state, f"`{self.ctx.code_of(call.func)}()` modifies", twin, f".{method}()", others)
            return receiver
        if method == "detach":
            return receiver.detached("detach")
        if method in self.facts.view_methods:
            return receiver.view(strided=method in NON_CONTIGUOUS_VIEWS)
        if method in self.facts.multi_view_methods:
            view = receiver.view(strided=True)
            return Val(view.storages, view.grad, call, True, hidden=view.hidden, multi_view=method, dtype=view.dtype)
        if method in NON_TENSOR_METHODS:
            return NOT_TENSOR
        if method.startswith("new_"):
            return Val(fresh_storage(), Grad.NO, origin=call)
        if method == "contiguous":
            return self.new_tensor([receiver]) if receiver.strided else receiver.view()
        if method in _DTYPE_METHODS or method == "to":
            return self.convert(receiver, method, call, args)
        result = self.new_tensor([receiver, *args])
        if method in self.facts.ops:
            bound = {"self": receiver, **self.bind(method, call, args, skip=1)}
            texts = {"self": self.ctx.code_of(target_expr), **_argument_texts(self.ctx, call, self.facts.ops[method].params[1:])}
            self.record_op(method, f".{method}()", bound, result, call, state, texts)
        return result

    def convert(self, receiver: Val, method: str, call: cst.Call, args: list[Value]) -> Val:
        """`.to(dtype)` returns `self` when the dtype already matches (autocast makes that common)."""
        dtype = _DTYPE_METHODS.get(method) or next((name for arg in call.args if (name := dtype_name(arg.value))), None)
        if dtype is not None and receiver.dtype == dtype:
            return receiver.view()
        result = self.new_tensor([receiver, *args])
        return Val(result.storages, result.grad, result.origin, dtype=dtype)

    def call_module(self, module: ModuleRef, call: cst.Call, args: list[Value], state: State) -> Value:
        if module.kind == "Sequential" and module.items is not None:
            value = args[0] if args else NOT_TENSOR
            for item in module.items:
                value = self.apply_module(item, call, [value], state)
            return value
        return self.apply_module(module, call, args, state)

    def apply_module(self, module: ModuleRef, call: cst.Call, args: list[Value], state: State) -> Value:
        value = args[0] if args else NOT_TENSOR
        if module.kind is None:
            if module.cls_name is not None and any(map(is_tensor, args)):
                found = self.project.resolve_class(self.ctx, module.cls_name)
                if found is not None and "forward" in found[1].methods:
                    return self.call_project(found[0], found[1].methods["forward"], found[1], call, args, state)
            return self.opaque_result(args)
        if not is_tensor(value):
            return NOT_TENSOR
        label = self.ctx.code_of(call.func) + f" ({module.kind})"
        saves = self.facts.module_saves.get(module.kind, frozenset())
        writes = module.inplace and self.facts.inplace_module_saves.get(module.kind, saves) is not None
        if writes:
            # In place, what is saved differs: ELU keeps the tensor it overwrote, Hardswish a copy.
            saves = self.facts.inplace_module_saves.get(module.kind) or frozenset()
            first = call.args[0].value if call.args else call
            self.write(Form.INPLACE_ACTIVATION, call, first, value, state, f"`{label}` with inplace=True rewrites", hidden_from_reader=True)
            result = value
        else:  # out of place, or an inplace flag the module ignores (AlphaDropout)
            # A module that saves its input does so for its own weights: its output requires grad.
            result = self.new_tensor([value], grad=Grad.MAYBE if "input" in saves and self.grad_enabled else None)
        if self.autocast is not None:
            result = Val(result.storages, result.grad, result.origin, dtype=self.autocast)
        if self.grad_enabled:
            if "input" in saves and not writes:
                # Saved for the module's own weight gradient, whatever the input is. (In place,
                # autograd saves a copy of the input it is about to overwrite.)
                argument = self.ctx.code_of(call.args[0].value) if call.args else "its input"
                state.add_save(value, SaveRecord(label, argument, call))
            if "result" in saves and value.grad > Grad.NO:
                state.add_save(result, SaveRecord(label, "its result", call, certain=value.grad > Grad.UNKNOWN))
        return result

    def call_autograd_function(self, owner: cst.BaseExpression, call: cst.Call, args: list[Value], state: State) -> Value:
        name = dotted(owner)
        found = self.project.resolve_class(self.ctx, name) if name is not None and any(map(is_tensor, args)) else None
        if found is None or not found[1].is_autograd_function or "forward" not in found[1].methods:
            return self.opaque_result(args)
        # Its writes are TIP005's business, reported inside `forward`.
        return self.call_project(found[0], found[1].methods["forward"], found[1], call, args, state, apply_writes=False)

    def call_project(
        self, ctx: FileContext, func: cst.FunctionDef, cls: ClassInfo | None, call: cst.Call, args: list[Value], state: State, apply_writes: bool = True
    ) -> Value:
        """A call into project code: apply what the callee's summary says it does to its arguments.

        Without a tensor among them a summary has nothing to apply to, so callers check that
        before resolving the callee: reading its file and summarising it is most of the cost of
        a large package whose functions mostly pass other things around (torch/_dynamo)."""
        if not any(map(is_tensor, args)):
            return NOT_TENSOR
        summary = self.project.summary(ctx, func, cls)
        bound = _bind_summary(summary, call, args)
        label = self.ctx.code_of(call.func)
        for write in summary.writes if apply_writes else ():
            value = bound.get(write.index)
            if not is_tensor(value):
                continue
            argument = _argument_expr(summary, call, write.index)
            if write.via_activation:
                self.write(Form.INPLACE_ACTIVATION, call, argument or call, value, state, f"`{label}(...)` applies an inplace activation that rewrites", hidden_from_reader=True)
            else:
                # `helper(x)` as a statement is called to update `x`: reading `x` afterwards is intended.
                intended = names_read(argument) if argument is not None and call is self.discarded else set()
                action = write.action if write.action.endswith(_CALLERS) else f"{write.action}{_CALLERS}"
                outer, self.grad_enabled = self.grad_enabled, self.grad_enabled and write.grad_enabled
                self.write(Form.ARGUMENT, call, argument or call, value, state, action, True, write.site, intended)
                self.grad_enabled = outer
        if self.grad_enabled:
            graph_args = max((grad_of(value) for value in bound.values()), default=Grad.NO) > Grad.UNKNOWN
            for index, records in summary.saves.items():
                value = bound.get(index)
                if is_tensor(value) and records:
                    inner = min(records, key=lambda record: record.order)
                    certain = graph_args or any(record.certain for record in records)
                    state.add_save(value, SaveRecord(f"{label} (its `{inner.op}`)", _argument_text(self.ctx, summary, call, index), call, certain))
        returned = [bound[index] for index in summary.returns if is_tensor(bound.get(index))]
        if returned:
            return returned[0].view()
        if summary.item_returns is not None and any(map(is_tensor, args)):
            return Val(items=tuple(self.returned_item(bound, aliases, args) for aliases in summary.item_returns))
        result = self.opaque_result(args)
        if is_tensor(result) and summary.result_saves and self.grad_enabled:
            inner = min(summary.result_saves, key=lambda record: record.order)
            certain = result.grad > Grad.UNKNOWN or any(record.certain for record in summary.result_saves)
            state.add_save(result, SaveRecord(f"{label} (its `{inner.op}`)", "its result", call, certain))
        return result

    def returned_item(self, bound: dict[int, Value], aliases: frozenset[int], args: list[Value]) -> Value:
        for index in aliases:
            if is_tensor(bound.get(index)):
                return bound[index].view()  # type: ignore[union-attr]
        return self.opaque_result(args)

    def opaque_result(self, args: Sequence[Value]) -> Value:
        """What a call into code we cannot see returns: a tensor (or tuple of them) made from its inputs."""
        if not any(map(is_tensor, args)):
            return NOT_TENSOR
        result = self.new_tensor(args)
        return Val(result.storages, result.grad, dtype=result.dtype, opaque=True)

    def training_loop_call(self, method: str, call: cst.Call, state: State) -> None:
        """TIP009: an optimizer step between a `backward(retain_graph=True)` and the next backward."""
        if method == "backward":
            path, span_of, retained = self.ctx.path, self.ctx.span_of, state.retained
            hazard = Hazard(True, lambda: step_reason(path, span_of(retained), span_of(call)))
            for step in state.steps:
                self.emit(Form.OPTIMIZER_STEP, step, f"`{self.ctx.code_of(step.node)}` updates parameters in place", hazard)
            state.steps = frozenset()
            retain = next((arg for arg in call.args if keyword_of(arg) == "retain_graph"), None)
            state.retained = call if retain is not None and literal(retain.value) is not False else None
        elif method == "step" and state.retained is not None and _steps_an_optimizer(call):
            state.steps |= {Site(self.ctx.path, call)}

    def bind(self, op: str, call: cst.Call, args: list[Value], skip: int = 0) -> dict[str, Value]:
        """Arguments by parameter name; `skip` drops leading parameters taken by the receiver."""
        facts = self.facts.ops.get(op)
        params = facts.params[skip:] if facts is not None else ()
        return {name: args[position] for name, position in _matched(call, params)}


def _matched(call: cst.Call, params: Sequence[str]) -> Iterator[tuple[str, int]]:
    """(parameter name, index in `call.args`) of each argument: keywords by their name,
    positionals in order; `*args`/`**kwargs` and surplus positionals match nothing."""
    positional = iter(params)
    for position, arg in enumerate(call.args):
        name = keyword_of(arg) or (next(positional, None) if not arg.star else None)
        if name is not None:
            yield name, position


def _bind_summary(summary: Summary, call: cst.Call, args: list[Value]) -> dict[int, Value]:
    names = list(summary.params)
    return {names.index(name): args[position] for name, position in _matched(call, names) if name in names}


def _argument_expr(summary: Summary, call: cst.Call, index: int) -> cst.BaseExpression | None:
    wanted = summary.params[index] if index < len(summary.params) else None
    return next((call.args[position].value for name, position in _matched(call, summary.params) if name == wanted), None)


def _argument_text(ctx: FileContext, summary: Summary, call: cst.Call, index: int) -> str:
    expr = _argument_expr(summary, call, index)
    return ctx.code_of(expr) if expr is not None else summary.params[index]


def _argument_texts(ctx: FileContext, call: cst.Call, params: Sequence[str]) -> dict[str, str]:
    return {name: ctx.code_of(call.args[position].value) for name, position in _matched(call, params)}


def _steps_an_optimizer(call: cst.Call) -> bool:
    """`opt.step()`, `self.optimizer.step()`, `scaler.step(optimizer)`; not `scheduler.step()`."""
    names = [dotted(call.func.value)] + [dotted(arg.value) for arg in call.args]  # type: ignore[attr-defined]
    return any(name is not None and "opt" in name.rsplit(".", 1)[-1].lower() for name in names)


def dtype_name(expr: cst.BaseExpression) -> str | None:
    """`torch.bfloat16` -> "bfloat16"; anything that is not a dtype attribute -> None."""
    name = dotted(expr)
    if name is None or not name.startswith(("torch.", "th.")):
        return None
    short = name.rsplit(".", 1)[-1]
    return {"float": "float32", "half": "float16", "double": "float64"}.get(short, short) if short[:1].islower() and any(c.isdigit() for c in short) or short in ("float", "half", "double", "bfloat16") else None
