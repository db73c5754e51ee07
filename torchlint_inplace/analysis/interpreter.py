"""A small abstract interpreter over one function body, tracking tensors by storage.

It walks statements in order, keeps for every name what it may hold (`values.Val`), records
which storages autograd saved for backward (from the op table generated from torch), and asks
`write` about every in-place write. Branches are merged conservatively; loop bodies run twice
so that state carried from one iteration into the next (an RNN hidden state) is seen; code
under `torch.no_grad()` records nothing. Calls into project code apply the callee's summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import libcst as cst

from .autograd_function import FunctionContract
from .classes import ClassInfo
from .hazards import Hazard, hidden_hazard, leaf_hazard, message, multi_view_hazard, saved_hazard, stale_hazard, step_hazard
from .imports import dotted
from .model import Form, Mutation
from .params import function_grad_enabled, tensor_list_parameters, tensor_parameters
from .project import FileContext, Project
from .summaries import Summary, SummaryRecorder
from .values import (
    NOT_TENSOR,
    Grad,
    ModuleRef,
    PendingWrite,
    SaveRecord,
    Site,
    State,
    Val,
    Value,
    fresh_storage,
    merge_states,
    merge_values,
    reachable,
)

_BINARY_OPS = {
    cst.Multiply: ("mul", "*"),
    cst.Divide: ("div", "/"),
    cst.MatrixMultiply: ("matmul", "@"),
    cst.Power: ("pow", "**"),
    cst.Add: ("add", "+"),
    cst.Subtract: ("sub", "-"),
    cst.FloorDivide: ("floor_divide", "//"),
    cst.Modulo: ("remainder", "%"),
}
_AUGMENTED_OPS = {
    cst.AddAssign: ("add", "+="),
    cst.SubtractAssign: ("sub", "-="),
    cst.MultiplyAssign: ("mul", "*="),
    cst.DivideAssign: ("div", "/="),
    cst.MatrixMultiplyAssign: ("matmul", "@="),
    cst.PowerAssign: ("pow", "**="),
    cst.FloorDivideAssign: ("floor_divide", "//="),
    cst.ModuloAssign: ("remainder", "%="),
    cst.BitAndAssign: ("bitwise_and", "&="),
    cst.BitOrAssign: ("bitwise_or", "|="),
    cst.BitXorAssign: ("bitwise_xor", "^="),
    cst.LeftShiftAssign: ("bitwise_left_shift", "<<="),
    cst.RightShiftAssign: ("bitwise_right_shift", ">>="),
}
_COMMUTATIVE = frozenset({"mul", "add"})

# Tensor methods and attributes whose result is not a tensor.
_NON_TENSOR_METHODS = frozenset(
    {"size", "dim", "numel", "item", "tolist", "stride", "data_ptr", "element_size", "nelement", "is_contiguous",
     "is_floating_point", "is_complex", "get_device", "storage_offset", "ndimension", "untyped_storage", "storage",
     "numpy", "backward", "register_hook", "retain_grad", "requires_grad_", "__len__", "equal", "allclose"}
)
_NON_TENSOR_ATTRIBUTES = frozenset(
    {"shape", "dtype", "device", "ndim", "requires_grad", "is_leaf", "grad_fn", "is_cuda", "layout", "names", "_version"}
)
# dtype shorthands for `.to(dtype)`, which returns `self` when the dtype already matches.
_DTYPE_METHODS = {"float": "float32", "double": "float64", "half": "float16", "bfloat16": "bfloat16"}
_NON_CONTIGUOUS_VIEWS = frozenset({"transpose", "permute", "t", "T", "mT", "H", "mH", "movedim", "moveaxis", "swapaxes", "swapdims", "expand", "expand_as"})
_GRAD_OFF = frozenset({"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.inference_mode"})
_GRAD_ON = frozenset({"torch.enable_grad", "torch.autograd.enable_grad"})
_SET_GRAD = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled"})
_AUTOCAST = frozenset({"torch.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast", "torch.cpu.amp.autocast"})
_TORCH_NAMESPACES = frozenset({"torch", "torch.nn.functional", "torch.special", "torch.linalg", "torch.fft"})
_FUNCTIONAL = "torch.nn.functional"
# In-place helpers that run under no_grad themselves and are meant for initialisation.
_SAFE_INPLACE_PREFIXES = ("torch.nn.init.", "torch.nn.utils.")
_MAX_LOOP_NESTING = 3
_CALLERS = " the caller's"


class FunctionInterpreter:
    def __init__(
        self,
        project: Project,
        ctx: FileContext,
        cls: ClassInfo | None,
        sink: dict[tuple, Mutation],
        recorder: SummaryRecorder | None = None,
        report: FileContext | None = None,
    ) -> None:
        self.project = project
        self.ctx = ctx
        self.report = report or ctx  # the file whose findings are collected: a callee's, when reading its callers
        self.param_storages: frozenset[int] = frozenset()
        self.facts = ctx.facts
        self.cls = cls
        self.sink = sink
        self.recorder = recorder
        self.contract: FunctionContract | None = None
        self.ctx_name: str | None = None
        self.grad_enabled = True
        self.discarded: cst.BaseExpression | None = None
        self.autocast: str | None = None
        self.loop_depth = 0
        self.jumps: list[list[State]] = []

    # ----------------------------------------------------------------- entry points

    def run_function(self, func: cst.FunctionDef, params: dict[str, Val] | None = None) -> State:
        if params is None:
            params = {name: Val(fresh_storage(), grad, origin=func) for name, grad in tensor_parameters(func, self.cls).items()}
            grad = Grad.MAYBE if self.cls is not None and func.name.value == "forward" else Grad.UNKNOWN
            for name in tensor_list_parameters(func):
                params[name] = Val(items=(Val(fresh_storage(), grad, origin=func),))
        state = State(env=dict(params))
        self.param_storages = frozenset().union(*(value.storages for value in params.values())) if params else frozenset()
        self.grad_enabled = function_grad_enabled(func, self.cls, self.ctx.imports)
        if self.cls is not None and self.cls.is_autograd_function and func.name.value == "forward":
            positional = [*func.params.posonly_params, *func.params.params]
            self.ctx_name = positional[0].name.value if positional else None
            self.contract = FunctionContract(self.ctx, {name: value.storages for name, value in params.items()})
        final = self.exec_block(func.body, state)
        if self.contract is not None:
            for mutation in self.contract.mutations():
                self.sink.setdefault((id(mutation.node), mutation.form), mutation)
        if self.recorder is not None:
            self.recorder.on_saves(final.saves)
        return final

    def run_statements(self, statements: Sequence[cst.BaseStatement]) -> None:
        self.exec_statements(statements, State())

    # ----------------------------------------------------------------- statements

    def exec_block(self, block: cst.BaseSuite, state: State) -> State:
        if isinstance(block, cst.SimpleStatementSuite):
            return self.exec_small_statements(block.body, state)
        return self.exec_statements(block.body, state)

    def exec_statements(self, statements: Sequence[cst.BaseStatement], state: State) -> State:
        for statement in statements:
            if state.dead:
                break
            state = self.exec_statement(statement, state)
        return state

    def exec_small_statements(self, statements: Sequence[cst.BaseSmallStatement], state: State) -> State:
        for small in statements:
            if state.dead:
                break
            state = self.exec_small(small, state)
        return state

    def exec_statement(self, statement: cst.BaseStatement, state: State) -> State:
        if isinstance(statement, cst.SimpleStatementLine):
            return self.exec_small_statements(statement.body, state)
        if isinstance(statement, cst.If):
            return self.exec_if(statement, state)
        if isinstance(statement, (cst.For, cst.While)):
            return self.exec_loop(statement, state)
        if isinstance(statement, cst.With):
            return self.exec_with(statement, state)
        if isinstance(statement, (cst.Try, cst.TryStar)):
            return self.exec_try(statement, state)
        if isinstance(statement, cst.Match):
            return self.exec_match(statement, state)
        return state  # nested def / class: analysed on their own

    def exec_small(self, small: cst.BaseSmallStatement, state: State) -> State:
        if isinstance(small, cst.Assign):
            value = self.eval(small.value, state)
            for target in small.targets:
                self.assign(target.target, value, state, small)
        elif isinstance(small, cst.AnnAssign):
            if small.value is not None:
                self.assign(small.target, self.eval(small.value, state), state, small)
        elif isinstance(small, cst.AugAssign):
            self.exec_augassign(small, state)
        elif isinstance(small, cst.Expr):
            self.eval_statement_expression(small.value, state)
        elif isinstance(small, cst.Return):
            if small.value is not None:
                value = self.eval(small.value, state)
                if self.recorder is not None:
                    items = tuple(reachable(item) for item in value.items) if isinstance(value, Val) and value.items is not None else None
                    self.recorder.on_return(reachable(value), items)
                if self.contract is not None:
                    self.contract.on_return(small, reachable(value))
            if self.recorder is not None:
                self.recorder.on_saves(state.saves)
            state.dead = True
        elif isinstance(small, cst.Raise) or (isinstance(small, cst.Assert) and _literal(small.test) is False):
            state.dead = True
        elif isinstance(small, (cst.Break, cst.Continue)):
            if self.jumps:
                self.jumps[-1].append(state.copy())
            state.dead = True
        elif isinstance(small, cst.Del):
            for name in _names_in(small.target):
                state.env.pop(name, None)
                state.stale.pop(name, None)
        return state

    def eval_statement_expression(self, expr: cst.BaseExpression, state: State) -> None:
        self.discarded = expr  # a call made for its side effects: its arguments are meant to change
        if isinstance(expr, cst.Call):
            qualname = self.ctx.imports.qualname(expr.func)
            if qualname in _SET_GRAD and expr.args:
                enabled = _literal(expr.args[0].value)
                if enabled is not None:
                    self.grad_enabled = enabled
        self.eval(expr, state)

    def exec_if(self, node: cst.If, state: State) -> State:
        self.eval(node.test, state)
        body = self.exec_block(node.body, state.copy())
        if node.orelse is None:
            other = state
        elif isinstance(node.orelse, cst.If):
            other = self.exec_if(node.orelse, state.copy())
        else:
            other = self.exec_block(node.orelse.body, state.copy())
        return merge_states([body, other])

    def exec_loop(self, node: cst.For | cst.While, state: State) -> State:
        element = self.iteration_element(node.iter, state) if isinstance(node, cst.For) else self.eval(node.test, state)
        rounds = 2 if self.loop_depth < _MAX_LOOP_NESTING else 1
        self.loop_depth += 1
        entry = state
        exits = [state]
        current = state
        for _ in range(rounds):
            current = current.copy()
            if isinstance(node, cst.For):
                self.assign(node.target, element, current, node)
            self.jumps.append([])
            after = self.exec_block(node.body, current)
            jumps = self.jumps.pop()
            exits.extend(jumps)
            exits.append(after)
            current = merge_states([entry, after, *jumps])
        self.loop_depth -= 1
        merged = merge_states(exits)
        if node.orelse is not None:
            merged = self.exec_block(node.orelse.body, merged)
        return merged

    def exec_with(self, node: cst.With, state: State) -> State:
        saved_mode, saved_autocast = self.grad_enabled, self.autocast
        for item in node.items:
            mode = self.grad_mode_of(item.item)
            if mode is not None:
                self.grad_enabled = mode
                continue
            autocast = self.autocast_of(item.item)
            if autocast is not None:
                self.autocast = autocast or None
                continue
            value = self.eval(item.item, state)
            if item.asname is not None:
                self.assign(item.asname.name, value, state, node)
        state = self.exec_block(node.body, state)
        self.grad_enabled, self.autocast = saved_mode, saved_autocast
        return state

    def exec_try(self, node: cst.Try | cst.TryStar, state: State) -> State:
        before = state.copy()
        after_body = self.exec_block(node.body, state)
        outcomes = [self.exec_block(handler.body, merge_states([before, after_body.copy()])) for handler in node.handlers]
        if node.orelse is not None:
            after_body = self.exec_block(node.orelse.body, after_body)
        merged = merge_states([after_body, *outcomes])
        if node.finalbody is not None:
            merged = self.exec_block(node.finalbody.body, merged if not merged.dead else before)
        return merged

    def exec_match(self, node: cst.Match, state: State) -> State:
        self.eval(node.subject, state)
        outcomes = [self.exec_block(case.body, state.copy()) for case in node.cases]
        return merge_states([state, *outcomes])

    def exec_augassign(self, node: cst.AugAssign, state: State) -> None:
        operand = self.eval(node.value, state)
        target = node.target
        op, symbol = _AUGMENTED_OPS[type(node.operator)]
        if isinstance(target, cst.Subscript):
            base = self.eval(target.value, state)
            if _is_tensor(base) and not _string_index(target):
                view = self.eval_subscript(target, state)
                action = f"`{self.ctx.code_of(target)} {symbol} ...` writes into"
                self.inplace_op(Form.INDEX_ASSIGN, node, target.value, base, state, action, op, symbol, {"other": operand}, view)
                return
            element = self.eval_subscript(target, state)  # `items[i] += x`: the element tensor, in place
            if _is_tensor(element):
                self.inplace_op(Form.AUG_ASSIGN, node, target, element, state, f"`{self.ctx.code_of(target)} {symbol} ...` modifies", op, symbol, {"other": operand})
            return
        current = self.eval(target, state)
        if not _is_tensor(current):
            # Python numbers, lists, ...: `n += 1` rebinds, nothing is written in place.
            self.assign(target, self.new_tensor([operand]) if _is_tensor(operand) else NOT_TENSOR, state, node)
            return
        self.inplace_op(Form.AUG_ASSIGN, node, target, current, state, f"`{self.ctx.code_of(target)} {symbol} ...` modifies", op, symbol, {"other": operand})

    def inplace_op(
        self, form: Form, node: cst.CSTNode, target_expr: cst.CSTNode, target: Val, state: State, action: str,
        op: str | None, label: str, others: dict[str, Value], written: Val | None = None,
    ) -> None:
        """An in-place op: it saves its operands before it writes (so `x *= x[:, :1]` breaks
        itself) and, like its out-of-place twin, its result after."""
        bound: dict[str, Value] = {"self": written or target, **others}
        texts = {name: self.ctx.code_of(expr) for name, expr in _operand_exprs(node).items()}
        if op is not None:
            self.record_op(op, label, bound, target, node, state, texts, only=lambda saved: saved not in ("self", "result"))
        self.write(form, node, target_expr, target, state, action)
        if op is not None:
            self.record_op(op, label, bound, target, node, state, {}, only=lambda saved: saved == "result")

    def assign(self, target: cst.BaseExpression, value: Value, state: State, statement: cst.CSTNode) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for index, element in enumerate(element.value for element in target.elements):
                if isinstance(element, cst.StarredElement):
                    self.assign(element.value, NOT_TENSOR, state, statement)
                elif _is_tensor(value) and value.items is None and not value.multi_view:
                    # `a, b = f(x)`: a tuple-returning op or module gives different tensors
                    self.assign(element, value.part(), state, statement)
                else:
                    self.assign(element, _item(value, index), state, statement)
            return
        if isinstance(target, cst.Subscript):
            base = self.eval(target.value, state)
            self.eval_slices(target, state)
            if _is_tensor(base) and not _string_index(target):
                self.write(Form.INDEX_ASSIGN, statement, target.value, base, state, f"`{self.ctx.code_of(target)} = ...` writes into")
            return
        name = dotted(target)
        if name is not None:
            state.env[name] = value
            state.stale.pop(name, None)
            # Rebinding `a` makes everything known about `a.b` stale.
            prefix = name + "."
            for key in [key for key in state.env if key.startswith(prefix)]:
                del state.env[key]

    # ----------------------------------------------------------------- expressions

    def eval(self, expr: cst.BaseExpression, state: State) -> Value:
        if isinstance(expr, cst.Name):
            self.read(expr.value, expr, state)
            return state.env.get(expr.value, NOT_TENSOR)
        if isinstance(expr, cst.Attribute):
            return self.eval_attribute(expr, state)
        if isinstance(expr, cst.Call):
            return self.eval_call(expr, state)
        if isinstance(expr, cst.BinaryOperation):
            return self.eval_binary(expr, state)
        if isinstance(expr, cst.UnaryOperation):
            operand = self.eval(expr.expression, state)
            return self.new_tensor([operand]) if _is_tensor(operand) else NOT_TENSOR
        if isinstance(expr, cst.Subscript):
            return self.eval_subscript(expr, state)
        if isinstance(expr, (cst.Tuple, cst.List)):
            return Val(items=tuple(self.eval(element.value, state) for element in expr.elements))
        if isinstance(expr, cst.IfExp):
            self.eval(expr.test, state)
            return merge_values(self.eval(expr.body, state), self.eval(expr.orelse, state))
        if isinstance(expr, cst.NamedExpr):
            value = self.eval(expr.value, state)
            self.assign(expr.target, value, state, expr)
            return value
        if isinstance(expr, cst.Comparison):
            operands = [self.eval(expr.left, state)] + [self.eval(target.comparator, state) for target in expr.comparisons]
            return self.new_tensor([], grad=Grad.NO) if any(map(_is_tensor, operands)) else NOT_TENSOR
        if isinstance(expr, cst.BooleanOperation):
            return merge_values(self.eval(expr.left, state), self.eval(expr.right, state))
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            return self.eval_comprehension(expr, state)
        if isinstance(expr, (cst.Dict, cst.Set, cst.Await, cst.FormattedString)):
            for child in expr.children:
                if isinstance(child, cst.BaseExpression):
                    self.eval(child, state)
        return NOT_TENSOR

    def iteration_element(self, iterable: cst.BaseExpression, state: State) -> Value:
        """What one iteration binds: `enumerate(x)` gives (index, element), `zip(a, b)` a tuple."""
        if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value in ("enumerate", "zip", "reversed"):
            parts = [_element_of(self.eval(arg.value, state)) for arg in iterable.args if not _keyword(arg)]
            if iterable.func.value == "enumerate":
                return Val(items=(NOT_TENSOR, parts[0] if parts else NOT_TENSOR))
            if iterable.func.value == "zip":
                return Val(items=tuple(parts))
            return parts[0] if parts else NOT_TENSOR
        return _element_of(self.eval(iterable, state))

    def eval_comprehension(self, expr: cst.ListComp | cst.GeneratorExp | cst.SetComp, state: State) -> Value:
        """A homogeneous list: its element evaluated once, with the loop names bound (then restored)."""
        outer = dict(state.env)
        clause: cst.CompFor | None = expr.for_in
        while clause is not None:
            self.assign(clause.target, self.iteration_element(clause.iter, state), state, expr)
            for condition in clause.ifs:
                self.eval(condition.test, state)
            clause = clause.inner_for_in
        element = self.eval(expr.elt, state)
        state.env = outer
        return Val(items=(element,))

    def read(self, name: str, node: cst.CSTNode, state: State) -> None:
        """Reading a name whose tensor a hidden write changed under it: silent corruption."""
        pending = state.stale.pop(name, None)
        if pending is None:
            return
        hazard = stale_hazard(self.ctx.path, name, self.ctx.span_of(node))
        self.emit(pending.form, pending.site, f"{pending.action} `{pending.written}` in place", hazard)

    def eval_attribute(self, expr: cst.Attribute, state: State) -> Value:
        name = dotted(expr)
        if name is not None and name in state.env:
            self.read(name, expr, state)
            return state.env[name]
        attr = expr.attr.value
        if _is_self(expr.value) and self.cls is not None:
            value = self.class_attribute(attr)
            if value is not None:
                state.env[name] = value
                return value
        base = self.eval(expr.value, state)
        if not _is_tensor(base):
            return NOT_TENSOR
        if attr == "data":
            return base.detached("data")
        if attr in self.facts.view_attributes:
            return base.view(strided=attr in _NON_CONTIGUOUS_VIEWS)
        if attr == "grad":
            return Val(fresh_storage(), Grad.NO, origin=expr)
        return NOT_TENSOR

    def class_attribute(self, attr: str) -> Value | None:
        assert self.cls is not None
        if attr in self.cls.parameters:
            return Val(fresh_storage(), Grad.LEAF, origin=self.cls.parameters[attr])
        if attr in self.cls.buffers:
            return Val(fresh_storage(), Grad.NO, origin=self.cls.buffers[attr])
        return self.cls.modules.get(attr)

    def eval_subscript(self, expr: cst.Subscript, state: State) -> Value:
        base = self.eval(expr.value, state)
        advanced = self.eval_slices(expr, state)
        if isinstance(base, ModuleRef):
            return _element_of(base)
        if isinstance(base, Val) and base.items is not None and len(expr.slice) == 1:
            index = expr.slice[0].slice
            if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer):
                return _item(base, int(index.value.value, 0))
            return _element_of(base)
        if not _is_tensor(base) or _string_index(expr):
            return NOT_TENSOR  # `args["stride"]`: a dict, whatever we thought it was
        if base.opaque and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
            return base.part()  # `outputs[1]` of a module we cannot see: likely a tuple element
        # Basic indexing returns a view; indexing with a tensor or a list copies.
        return self.new_tensor([base]) if advanced else base.view()

    def eval_slices(self, expr: cst.Subscript, state: State) -> bool:
        advanced = False
        for element in expr.slice:
            index = element.slice
            if isinstance(index, cst.Index):
                value = self.eval(index.value, state)
                if _is_tensor(value) or isinstance(index.value, (cst.List, cst.ListComp)) or (isinstance(value, Val) and value.items is not None):
                    advanced = True
            else:
                for part in (index.lower, index.upper, index.step):
                    if part is not None:
                        self.eval(part, state)
        return advanced

    def eval_binary(self, expr: cst.BinaryOperation, state: State) -> Value:
        left = self.eval(expr.left, state)
        right = self.eval(expr.right, state)
        if not (_is_tensor(left) or _is_tensor(right)):
            return NOT_TENSOR
        op, symbol = _BINARY_OPS.get(type(expr.operator), (None, ""))
        texts = {"self": self.ctx.code_of(expr.left), "other": self.ctx.code_of(expr.right)}
        if op in _COMMUTATIVE and not _is_tensor(left):
            left, right = right, left
            texts = {"self": texts["other"], "other": texts["self"]}
        result = self.new_tensor([left, right])
        if op is not None:
            second = self.second_param(op)
            texts[second] = texts.pop("other")
            self.record_op(op, symbol, {"self": left, second: right}, result, expr, state, texts)
        return result

    def second_param(self, op: str) -> str:
        facts = self.facts.ops.get(op)
        return facts.params[1] if facts is not None and len(facts.params) > 1 else "other"

    # ----------------------------------------------------------------- calls

    def eval_call(self, call: cst.Call, state: State) -> Value:
        func = call.func
        args = [self.eval(arg.value, state) for arg in call.args]
        qualname = self.ctx.imports.qualname(func)
        if qualname is not None and qualname.startswith("torch."):
            return self.call_torch(qualname, call, args, state)
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if _is_self(func.value) or dotted(func) in state.env:
                callee = self.eval_attribute(func, state)
                if isinstance(callee, ModuleRef):
                    return self.call_module(callee, call, args, state)
            receiver = self.eval(func.value, state)
            if _is_tensor(receiver):
                return self.call_method(receiver, method, call, args, state)
            self.training_loop_call(method, call, state)
            if self.contract is not None and isinstance(func.value, cst.Name) and func.value.value == self.ctx_name:
                self.contract.on_ctx_call(method, call, args, state)
                return NOT_TENSOR
            if _is_self(func.value) and self.cls is not None and method in self.cls.methods:
                return self.call_project(self.ctx, self.cls.methods[method], self.cls, call, args, state)
            if method == "apply":
                return self.call_autograd_function(func.value, call, args, state)
            if _is_self(func.value):
                # A submodule or method of this class whose definition is not known here.
                return self.opaque_result(args)
            return NOT_TENSOR
        callee = self.eval(func, state)
        if isinstance(callee, ModuleRef):
            return self.call_module(callee, call, args, state)
        name = dotted(func)
        if name is not None and name not in state.env:
            found = self.project.resolve_function(self.ctx, name)
            if found is not None:
                return self.call_project(found[0], found[1], None, call, args, state)
        return NOT_TENSOR

    def call_torch(self, qualname: str, call: cst.Call, args: list[Value], state: State) -> Value:
        if qualname.startswith(_SAFE_INPLACE_PREFIXES):
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
            requires_grad = any(_keyword(arg) == "requires_grad" and _literal(arg.value) for arg in call.args)
            if requires_grad and self.grad_enabled:
                return Val(fresh_storage(), Grad.LEAF, origin=call)
            return Val(fresh_storage(), Grad.NO, origin=call, fresh_buffer=True)
        tensors = [arg for arg in args if _is_tensor(arg)]
        if not tensors or (namespace == "torch" and short not in self.facts.tensor_functions and short not in self.facts.ops):
            return NOT_TENSOR
        label = self.ctx.code_of(call.func)
        first = call.args[0].value if call.args else call
        twin = self.facts.inplace_functions.get(short) if namespace in ("torch", _FUNCTIONAL) else None
        if twin is not None or (namespace == _FUNCTIONAL and self.inplace_flag(short, call)):
            # torch.relu_(x), F.relu(x, inplace=True): rewrites its input
            target = args[0] if args and _is_tensor(args[0]) else tensors[0]
            self.write(Form.INPLACE_ACTIVATION, call, first, target, state, f"`{label}(...)` rewrites", hidden_from_reader=True)
            self.record_op(twin or short, label, {"self": target}, target, call, state, {}, only=lambda saved: saved == "result")
            return target
        out = next((value for arg, value in zip(call.args, args) if _keyword(arg) == "out"), None)
        if _is_tensor(out):
            out_expr = next(arg.value for arg in call.args if _keyword(arg) == "out")
            self.write(Form.OUT_ARGUMENT, call, out_expr, out, state, f"`{label}(..., out=...)` writes into")
            return out
        result = self.new_tensor(tensors)
        if short in self.facts.view_methods and args and _is_tensor(args[0]):
            result = args[0].view(strided=short in _NON_CONTIGUOUS_VIEWS)
        bound = self.bind(short, call, args)
        self.record_op(short, label, bound, result, call, state, _argument_texts(self.ctx, call, self.facts.ops[short].params if short in self.facts.ops else ()))
        return result

    def inplace_flag(self, short: str, call: cst.Call) -> bool:
        index = self.facts.inplace_kwarg_functionals.get(short)
        if index is None:
            return False
        positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
        for arg in call.args:
            if _keyword(arg) == "inplace":
                return bool(_literal(arg.value))
        return index < len(positional) and bool(_literal(positional[index].value))

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
            return receiver.view(strided=method in _NON_CONTIGUOUS_VIEWS)
        if method in self.facts.multi_view_methods:
            view = receiver.view(strided=True)
            return Val(view.storages, view.grad, call, True, hidden=view.hidden, multi_view=method, dtype=view.dtype)
        if method in _NON_TENSOR_METHODS:
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
        dtype = _DTYPE_METHODS.get(method) or next((name for arg in call.args if (name := _dtype_name(arg.value))), None)
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
            if module.cls_name is not None:
                found = self.project.resolve_class(self.ctx, module.cls_name)
                if found is not None and "forward" in found[1].methods:
                    return self.call_project(found[0], found[1].methods["forward"], found[1], call, args, state)
            return self.opaque_result(args)
        if not _is_tensor(value):
            return NOT_TENSOR
        label = self.ctx.code_of(call.func) + f" ({module.kind})"
        saves = self.facts.module_saves.get(module.kind, frozenset())
        if module.inplace:
            first = call.args[0].value if call.args else call
            self.write(Form.INPLACE_ACTIVATION, call, first, value, state, f"`{label}` with inplace=True rewrites", hidden_from_reader=True)
            result = value
        else:
            # A module that saves its input does so for its own weights: its output requires grad.
            result = self.new_tensor([value], grad=Grad.MAYBE if "input" in saves and self.grad_enabled else None)
        if self.autocast is not None:
            result = Val(result.storages, result.grad, result.origin, dtype=self.autocast)
        if self.grad_enabled:
            if "input" in saves and not module.inplace:
                # Saved for the module's own weight gradient, whatever the input is. (In place,
                # autograd saves a copy of the input it is about to overwrite.)
                argument = self.ctx.code_of(call.args[0].value) if call.args else "its input"
                state.add_save(value, SaveRecord(label, argument, call))
            if "result" in saves and value.grad > Grad.NO:
                state.add_save(result, SaveRecord(label, "its result", call, certain=value.grad > Grad.UNKNOWN))
        return result

    def call_autograd_function(self, owner: cst.BaseExpression, call: cst.Call, args: list[Value], state: State) -> Value:
        name = dotted(owner)
        found = self.project.resolve_class(self.ctx, name) if name is not None else None
        if found is None or not found[1].is_autograd_function or "forward" not in found[1].methods:
            return self.opaque_result(args)
        # Its writes are TIP005's business, reported inside `forward`.
        return self.call_project(found[0], found[1].methods["forward"], found[1], call, args, state, apply_writes=False)

    def call_project(
        self, ctx: FileContext, func: cst.FunctionDef, cls: ClassInfo | None, call: cst.Call, args: list[Value], state: State, apply_writes: bool = True
    ) -> Value:
        """A call into project code: apply what the callee's summary says it does to its arguments."""
        summary = self.project.summary(ctx, func, cls)
        bound = _bind_summary(summary, call, args)
        label = self.ctx.code_of(call.func)
        for write in summary.writes if apply_writes else ():
            value = bound.get(write.index)
            if not _is_tensor(value):
                continue
            argument = _argument_expr(summary, call, write.index)
            if write.via_activation:
                self.write(Form.INPLACE_ACTIVATION, call, argument or call, value, state, f"`{label}(...)` applies an inplace activation that rewrites", hidden_from_reader=True)
            else:
                # `helper(x)` as a statement is called to update `x`: reading `x` afterwards is intended.
                intended = {_root_name(argument)} if argument is not None and call is self.discarded else set()
                action = write.action if write.action.endswith(_CALLERS) else f"{write.action}{_CALLERS}"
                outer, self.grad_enabled = self.grad_enabled, self.grad_enabled and write.grad_enabled
                self.write(Form.ARGUMENT, call, argument or call, value, state, action, True, write.site, intended)
                self.grad_enabled = outer
        if self.grad_enabled:
            for index, records in summary.saves.items():
                value = bound.get(index)
                if _is_tensor(value) and records:
                    inner = min(records, key=lambda record: record.order)
                    state.add_save(value, SaveRecord(f"{label} (its `{inner.op}`)", _argument_text(self.ctx, summary, call, index), call))
        returned = [bound[index] for index in summary.returns if _is_tensor(bound.get(index))]
        if returned:
            return returned[0].view()
        if summary.item_returns is not None and any(map(_is_tensor, args)):
            return Val(items=tuple(self.returned_item(bound, aliases, args) for aliases in summary.item_returns))
        result = self.opaque_result(args)
        if _is_tensor(result) and summary.result_saves and self.grad_enabled:
            inner = min(summary.result_saves, key=lambda record: record.order)
            state.add_save(result, SaveRecord(f"{label} (its `{inner.op}`)", "its result", call))
        return result

    def returned_item(self, bound: dict[int, Value], aliases: frozenset[int], args: list[Value]) -> Value:
        for index in aliases:
            if _is_tensor(bound.get(index)):
                return bound[index].view()  # type: ignore[union-attr]
        return self.opaque_result(args)

    def opaque_result(self, args: Sequence[Value]) -> Value:
        """What a call into code we cannot see returns: a tensor (or tuple of them) made from its inputs."""
        if not any(map(_is_tensor, args)):
            return NOT_TENSOR
        result = self.new_tensor(args)
        return Val(result.storages, result.grad, dtype=result.dtype, opaque=True)

    def training_loop_call(self, method: str, call: cst.Call, state: State) -> None:
        """TIP009: an optimizer step between a `backward(retain_graph=True)` and the next backward."""
        if method == "backward":
            for step in state.steps:
                hazard = step_hazard(self.ctx.path, self.ctx.span_of(state.retained), self.ctx.span_of(call))
                self.emit(Form.OPTIMIZER_STEP, step, f"`{self.ctx.code_of(step.node)}` updates parameters in place", hazard)
            state.steps = frozenset()
            retain = next((arg for arg in call.args if _keyword(arg) == "retain_graph"), None)
            state.retained = call if retain is not None and _literal(retain.value) is not False else None
        elif method == "step" and state.retained is not None and _steps_an_optimizer(call):
            state.steps |= {Site(self.ctx.path, call)}

    # ----------------------------------------------------------------- saves and writes

    def bind(self, op: str, call: cst.Call, args: list[Value], skip: int = 0) -> dict[str, Value]:
        """Arguments by parameter name; `skip` drops leading parameters taken by the receiver."""
        facts = self.facts.ops.get(op)
        params = list(facts.params[skip:]) if facts is not None else []
        bound: dict[str, Value] = {}
        positional = iter(params)
        for arg, value in zip(call.args, args):
            keyword = _keyword(arg)
            if keyword is not None:
                bound[keyword] = value
            elif not arg.star:
                name = next(positional, None)
                if name is not None:
                    bound[name] = value
        return bound

    def record_op(
        self, op: str, label: str, bound: dict[str, Value], result: Val, node: cst.CSTNode, state: State, texts: dict[str, str], only=None
    ) -> None:
        """Record what `op` saves for backward. In-place ops pass `only`: autograd saves a clone
        of an in-place op's original `self`, never `self` itself."""
        facts = self.facts.ops.get(op)
        if facts is None or not self.grad_enabled:
            return
        for saved, triggers in facts.saves.items():
            if only is not None and not only(saved):
                continue
            grads = [_grad(bound.get(trigger)) for trigger in triggers]
            if max(grads, default=Grad.NO) is Grad.NO:
                continue
            target = result if saved == "result" else bound.get(saved)
            if _is_tensor(target):
                what = "its result" if saved == "result" else texts.get(saved, saved)
                state.add_save(target, SaveRecord(label, what, node, certain=max(grads) > Grad.UNKNOWN))

    def write(
        self,
        form: Form,
        node: cst.CSTNode,
        target_expr: cst.CSTNode,
        target: Val,
        state: State,
        action: str,
        hidden_from_reader: bool = False,
        site: Site | None = None,
        intended_readers: set[str | None] = frozenset(),
    ) -> None:
        """An in-place write to `target`: report it if the analysis can say why it breaks."""
        if not target.is_tensor:
            return
        written = self.ctx.code_of(target_expr)
        site = site or Site(self.ctx.path, node)
        if self.recorder is not None:
            self.recorder.on_write(target.storages, site, form, action, form is Form.INPLACE_ACTIVATION, self.grad_enabled)
        if self.contract is not None:
            self.contract.on_write(target.storages, site, action, written, state)
            return
        if site.path != self.report.path:
            return  # found when the file it lives in is checked, by reading its callers
        if target.storages & self.param_storages and self.report is self.ctx:
            self.project.mark_argument_writer(self.ctx)
        if target.hidden is not None:
            form = Form.HIDDEN
        hazard = self.hazard_of(target, state, site, written)
        if hazard is not None:
            exclusive = isinstance(target_expr, cst.Name) and self.is_exclusive(target_expr.value, target, state)
            self.emit(form, site, f"{action} `{written}` in place", hazard, target_expr, exclusive)
        elif hidden_from_reader and self.grad_enabled:
            pending = PendingWrite(form, site, action, written)
            if target.fresh_buffer and target.grad is Grad.NO:
                return  # an out-parameter: a buffer made to be filled, read afterwards on purpose
            for name, value in state.env.items():
                if isinstance(value, Val) and value.storages & target.storages and name not in intended_readers:
                    state.stale[name] = pending

    def hazard_of(self, target: Val, state: State, site: Site, written: str) -> Hazard | None:
        # no_grad stops recording, not version counting: a write there to a tensor saved
        # earlier still raises at backward; only leaves may be written freely.
        if target.grad is Grad.LEAF and self.grad_enabled:
            return leaf_hazard(self.ctx.path, target.origin, self.ctx.span_of)
        if target.multi_view is not None and target.grad > Grad.NO and self.grad_enabled:
            return multi_view_hazard(target.multi_view, self.ctx.span_of(target.origin), target.grad > Grad.UNKNOWN)
        records = state.saves_of(target)
        if not records:
            return None
        certain = [record for record in records if record.certain]
        if target.hidden is not None:
            return hidden_hazard(self.ctx.path, target.hidden, certain or records, bool(certain), self.ctx.span_of)
        at = self.ctx.span_of(site.node) if self.report is self.ctx else None  # loop order only means something within one file
        return saved_hazard(self.ctx.path, written, certain or records, at, bool(certain), self.ctx.span_of)

    def is_exclusive(self, name: str, target: Val, state: State) -> bool:
        """A local that is not an argument and shares its storage with no other live name."""
        if target.storages & self.param_storages:
            return False
        return not any(other != name and isinstance(value, Val) and value.storages & target.storages for other, value in state.env.items())

    def emit(self, form: Form, site: Site, action: str, hazard: Hazard, target: cst.CSTNode | None = None, exclusive: bool = False) -> None:
        if site.path != self.report.path:
            return  # reported when the file it lives in is checked
        if self.report is not self.ctx:
            action = f"{action} (called from {Path(self.ctx.path).name})"
        self.sink.setdefault(
            (id(site.node), form),
            Mutation(
                form=form,
                node=site.node,
                span=self.report.span_of(site.node),
                message=message(action, hazard),
                consequence=hazard.consequence,
                related=hazard.related,
                help=hazard.help,
                certain=hazard.certain,
                target=target if site.path == self.ctx.path else None,
                exclusive=exclusive and site.path == self.ctx.path,
            ),
        )

    # ----------------------------------------------------------------- helpers

    def new_tensor(self, inputs: Sequence[Value], grad: Grad | None = None) -> Val:
        if grad is None:
            grad = min(max((_grad(value) for value in inputs), default=Grad.NO), Grad.MAYBE) if self.grad_enabled else Grad.NO
        return Val(fresh_storage(), grad, dtype=self.autocast)

    def grad_mode_of(self, expr: cst.BaseExpression) -> bool | None:
        target = expr.func if isinstance(expr, cst.Call) else expr
        qualname = self.ctx.imports.qualname(target)
        if qualname in _GRAD_OFF:
            return False
        if qualname in _GRAD_ON:
            return True
        if qualname in _SET_GRAD and isinstance(expr, cst.Call) and expr.args:
            return _literal(expr.args[0].value)
        return None

    def autocast_of(self, expr: cst.BaseExpression) -> str | None:
        """The low-precision dtype an autocast region computes in ("" when it is disabled)."""
        if not isinstance(expr, cst.Call) or self.ctx.imports.qualname(expr.func) not in _AUTOCAST:
            return None
        for arg in expr.args:
            if _keyword(arg) == "enabled" and _literal(arg.value) is False:
                return ""
            if _keyword(arg) == "dtype":
                return _dtype_name(arg.value) or "float16"
        device = next((arg.value for arg in expr.args if arg.keyword is None or _keyword(arg) == "device_type"), None)
        on_cpu = isinstance(device, cst.SimpleString) and "cpu" in device.value or "cpu" in (self.ctx.imports.qualname(expr.func) or "")
        return "bfloat16" if on_cpu else "float16"


def summarize(project: Project, ctx: FileContext, func: cst.FunctionDef, cls: ClassInfo | None) -> Summary:
    """Run `func` with a symbolic tensor in every parameter and record what it does to them."""
    params = list(func.params.posonly_params) + list(func.params.params) + list(func.params.kwonly_params)
    if cls is not None and params and not any(dotted(d.decorator) == "staticmethod" for d in func.decorators):
        params = params[1:]
    elif cls is not None and cls.is_autograd_function and params:
        params = params[1:]  # ctx
    symbolic = {param.name.value: Val(fresh_storage(), Grad.MAYBE) for param in params}
    recorder = SummaryRecorder({name: value.storages for name, value in symbolic.items()})
    interpreter = FunctionInterpreter(project, ctx, cls, {}, recorder)
    interpreter.run_function(func, symbolic)
    return recorder.summary


def _bind_summary(summary: Summary, call: cst.Call, args: list[Value]) -> dict[int, Value]:
    names = list(summary.params)
    bound: dict[int, Value] = {}
    position = 0
    for arg, value in zip(call.args, args):
        keyword = _keyword(arg)
        if keyword is not None:
            if keyword in names:
                bound[names.index(keyword)] = value
        elif not arg.star:
            bound[position] = value
            position += 1
    return bound


def _argument_expr(summary: Summary, call: cst.Call, index: int) -> cst.BaseExpression | None:
    name = summary.params[index] if index < len(summary.params) else None
    position = 0
    for arg in call.args:
        keyword = _keyword(arg)
        if keyword is not None:
            if keyword == name:
                return arg.value
        elif not arg.star:
            if position == index:
                return arg.value
            position += 1
    return None


def _argument_text(ctx: FileContext, summary: Summary, call: cst.Call, index: int) -> str:
    expr = _argument_expr(summary, call, index)
    return ctx.code_of(expr) if expr is not None else summary.params[index]


def _argument_texts(ctx: FileContext, call: cst.Call, params: Sequence[str]) -> dict[str, str]:
    texts: dict[str, str] = {}
    positional = iter(params)
    for arg in call.args:
        name = _keyword(arg) or (next(positional, None) if not arg.star else None)
        if name is not None:
            texts[name] = ctx.code_of(arg.value)
    return texts


def _steps_an_optimizer(call: cst.Call) -> bool:
    """`opt.step()`, `self.optimizer.step()`, `scaler.step(optimizer)`; not `scheduler.step()`."""
    names = [dotted(call.func.value)] + [dotted(arg.value) for arg in call.args]  # type: ignore[attr-defined]
    return any(name is not None and "opt" in name.rsplit(".", 1)[-1].lower() for name in names)


def _operand_exprs(node: cst.CSTNode) -> dict[str, cst.BaseExpression]:
    """The operand of an in-place statement as written: `x *= y` -> y, `x.mul_(y)` -> y."""
    if isinstance(node, cst.AugAssign):
        return {"other": node.value}
    if isinstance(node, cst.Call) and node.args and node.args[0].keyword is None:
        return {"other": node.args[0].value}
    return {}


def _keyword(arg: cst.Arg) -> str | None:
    return arg.keyword.value if arg.keyword is not None else None


def _dtype_name(expr: cst.BaseExpression) -> str | None:
    """`torch.bfloat16` -> "bfloat16"; anything that is not a dtype attribute -> None."""
    name = dotted(expr)
    if name is None or not name.startswith(("torch.", "th.")):
        return None
    short = name.rsplit(".", 1)[-1]
    return {"float": "float32", "half": "float16", "double": "float64"}.get(short, short) if short[:1].islower() and any(c.isdigit() for c in short) or short in ("float", "half", "double", "bfloat16") else None


def _grad(value: Value | None) -> Grad:
    return value.grad if isinstance(value, Val) and value.is_tensor else Grad.NO


def _is_tensor(value: Value | None) -> bool:
    return isinstance(value, Val) and value.is_tensor


def _item(value: Value, index: int) -> Value:
    if isinstance(value, Val) and value.items is not None:
        return value.items[index] if 0 <= index < len(value.items) else NOT_TENSOR
    return _element_of(value)


def _element_of(value: Value) -> Value:
    """An element of an iterable: a view for chunk()/unbind() results, else unknown."""
    if isinstance(value, ModuleRef):
        items = value.items or ()
        return items[0] if len(set(items)) == 1 else NOT_TENSOR
    if isinstance(value, Val) and value.is_tensor:
        return value.view()
    if isinstance(value, Val) and value.items:
        merged: Value = value.items[0]
        for item in value.items[1:]:
            merged = merge_values(merged, item)
        return merged
    return NOT_TENSOR


def _string_index(expr: cst.Subscript) -> bool:
    return any(isinstance(element.slice, cst.Index) and isinstance(element.slice.value, (cst.SimpleString, cst.ConcatenatedString)) for element in expr.slice)


def _root_name(expr: cst.BaseExpression) -> str | None:
    """The name a view expression hangs from: `patches[i]` -> patches, `self.buf[:, 0]` -> self.buf."""
    while isinstance(expr, cst.Subscript):
        expr = expr.value
    return dotted(expr)


def _is_self(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "self"


def _literal(expr: cst.BaseExpression) -> bool | None:
    if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
        return expr.value == "True"
    return None


def _names_in(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, (cst.Tuple, cst.List)):
        return [name for element in target.elements for name in _names_in(element.value)]
    name = dotted(target)
    return [name] if name is not None else []
