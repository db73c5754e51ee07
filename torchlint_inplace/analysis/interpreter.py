"""A small abstract interpreter over one function body, tracking tensors by storage.

It walks statements in order, keeps for every name what it may hold (`values.Val`), records
which storages autograd saved for backward (from the op table generated from torch), and asks
`write` about every in-place write. Branches are merged conservatively; loop bodies run twice
so that state carried from one iteration into the next (an RNN hidden state) is seen; code
under `torch.no_grad()` records nothing. Calls into project code apply the callee's summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path

import libcst as cst

from .autograd_function import FunctionContract
from .calls import CallEvaluator, dtype_name
from .classes import ClassInfo
from .hazards import Hazard, hidden_reason, leaf_reason, multi_view_reason, saved_reason, stale_reason
from .imports import dotted
from .model import Form, Mutation
from .params import function_grad_enabled, tensor_list_parameters, tensor_parameters
from .project import FileContext, Project
from .summaries import Summary, SummaryRecorder
from .syntax import is_self, keyword_of, literal, names_in, never_tensor_operand, operand_exprs, string_index
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
    element_of,
    fresh_storage,
    grad_of,
    is_tensor,
    item_of,
    merge_states,
    merge_values,
    reachable,
    storages_within,
)
from .vocabulary import AUTOCAST, GRAD_OFF, GRAD_ON, NON_CONTIGUOUS_VIEWS, SET_GRAD

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
_MAX_LOOP_NESTING = 3


class FunctionInterpreter(CallEvaluator):
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
        self.caller_storages: frozenset[int] = frozenset()
        self.view_names: set[str] = set()  # names ever bound to a view of a tensor (`v = out[1:]`)
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
        # What the caller can see: the arguments, and the elements of a `list[Tensor]` argument
        # (an optimizer's states): rebinding a name that holds one of them is not a safe fix.
        self.caller_storages = frozenset().union(*map(storages_within, params.values()))
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
        elif isinstance(small, cst.Raise) or (isinstance(small, cst.Assert) and literal(small.test) is False):
            state.dead = True
        elif isinstance(small, (cst.Break, cst.Continue)):
            if self.jumps:
                self.jumps[-1].append(state.copy())
            state.dead = True
        elif isinstance(small, cst.Del):
            for name in names_in(small.target):
                state.env.pop(name, None)
                state.stale.pop(name, None)
        return state

    def eval_statement_expression(self, expr: cst.BaseExpression, state: State) -> None:
        self.discarded = expr  # a call made for its side effects: its arguments are meant to change
        if isinstance(expr, cst.Call):
            qualname = self.ctx.imports.qualname(expr.func)
            if qualname in SET_GRAD and expr.args:
                enabled = literal(expr.args[0].value)
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
        if never_tensor_operand(node.value):  # `layers += [block]`: a list grows, no tensor is written
            if not isinstance(target, cst.Subscript):
                self.assign(target, NOT_TENSOR, state, node)
            return
        if isinstance(target, cst.Subscript):
            base = self.eval(target.value, state)
            if is_tensor(base) and not string_index(target):
                view = self.eval_subscript(target, state)
                action = f"`{self.ctx.code_of(target)} {symbol} ...` writes into"
                self.inplace_op(Form.INDEX_ASSIGN, node, target.value, base, state, action, op, symbol, {"other": operand}, view)
                return
            element = self.eval_subscript(target, state)  # `items[i] += x`: the element tensor, in place
            if is_tensor(element):
                self.inplace_op(Form.AUG_ASSIGN, node, target, element, state, f"`{self.ctx.code_of(target)} {symbol} ...` modifies", op, symbol, {"other": operand})
            return
        current = self.eval(target, state)
        if not is_tensor(current):
            # Python numbers, lists, ...: `n += 1` rebinds, nothing is written in place.
            self.assign(target, self.new_tensor([operand]) if is_tensor(operand) else NOT_TENSOR, state, node)
            return
        self.inplace_op(Form.AUG_ASSIGN, node, target, current, state, f"`{self.ctx.code_of(target)} {symbol} ...` modifies", op, symbol, {"other": operand})

    def inplace_op(
        self, form: Form, node: cst.CSTNode, target_expr: cst.CSTNode, target: Val, state: State, action: str,
        op: str | None, label: str, others: dict[str, Value], written: Val | None = None,
    ) -> None:
        """An in-place op: it saves its operands before it writes (so `x *= x[:, :1]` breaks
        itself) and, like its out-of-place twin, its result after."""
        bound: dict[str, Value] = {"self": written or target, **others}
        texts = {name: self.ctx.code_of(expr) for name, expr in operand_exprs(node).items()}
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
                elif is_tensor(value) and value.items is None and not value.multi_view:
                    # `a, b = f(x)`: a tuple-returning op or module gives different tensors
                    self.assign(element, value.part(), state, statement)
                else:
                    self.assign(element, item_of(value, index), state, statement)
            return
        if isinstance(target, cst.Subscript):
            base = self.eval(target.value, state)
            self.eval_slices(target, state)
            if is_tensor(base) and not string_index(target):
                self.write(Form.INDEX_ASSIGN, statement, target.value, base, state, f"`{self.ctx.code_of(target)} = ...` writes into")
            return
        name = dotted(target)
        if name is not None:
            state.env[name] = value
            state.stale.pop(name, None)
            if isinstance(statement, cst.Assign) and is_tensor(value) and self.is_view_expression(statement.value):
                self.view_names.add(name)
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
            return self.new_tensor([operand]) if is_tensor(operand) else NOT_TENSOR
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
            return self.new_tensor([], grad=Grad.NO) if any(map(is_tensor, operands)) else NOT_TENSOR
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
            parts = [element_of(self.eval(arg.value, state)) for arg in iterable.args if not keyword_of(arg)]
            if iterable.func.value == "enumerate":
                return Val(items=(NOT_TENSOR, parts[0] if parts else NOT_TENSOR))
            if iterable.func.value == "zip":
                return Val(items=tuple(parts))
            return parts[0] if parts else NOT_TENSOR
        return element_of(self.eval(iterable, state))

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
        span_of, path = self.ctx.span_of, self.ctx.path
        hazard = Hazard(True, lambda: stale_reason(path, name, span_of(node)))
        self.emit(pending.form, pending.site, f"{pending.action} `{pending.written}` in place", hazard)

    def eval_attribute(self, expr: cst.Attribute, state: State) -> Value:
        name = dotted(expr)
        if name is not None and name in state.env:
            self.read(name, expr, state)
            return state.env[name]
        attr = expr.attr.value
        if is_self(expr.value) and self.cls is not None:
            value = self.class_attribute(attr)
            if value is not None:
                state.env[name] = value
                return value
        base = self.eval(expr.value, state)
        if not is_tensor(base):
            return NOT_TENSOR
        if attr == "data":
            return base.detached("data")
        if attr in self.facts.view_attributes:
            return base.view(strided=attr in NON_CONTIGUOUS_VIEWS)
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
            return element_of(base)
        if isinstance(base, Val) and base.items is not None and len(expr.slice) == 1:
            index = expr.slice[0].slice
            if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer):
                return item_of(base, int(index.value.value, 0))
            return element_of(base)
        if not is_tensor(base) or string_index(expr):
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
                if is_tensor(value) or isinstance(index.value, (cst.List, cst.ListComp)) or (isinstance(value, Val) and value.items is not None):
                    advanced = True
            else:
                for part in (index.lower, index.upper, index.step):
                    if part is not None:
                        self.eval(part, state)
        return advanced

    def eval_binary(self, expr: cst.BinaryOperation, state: State) -> Value:
        left = self.eval(expr.left, state)
        right = self.eval(expr.right, state)
        if not (is_tensor(left) or is_tensor(right)):
            return NOT_TENSOR
        op, symbol = _BINARY_OPS.get(type(expr.operator), (None, ""))
        texts = {"self": self.ctx.code_of(expr.left), "other": self.ctx.code_of(expr.right)}
        if op in _COMMUTATIVE and not is_tensor(left):
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

    # ----------------------------------------------------------------- saves and writes

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
            grads = [grad_of(bound.get(trigger)) for trigger in triggers]
            if max(grads, default=Grad.NO) is Grad.NO:
                continue
            target = result if saved == "result" else bound.get(saved)
            if is_tensor(target):
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
            name = target_expr.value if isinstance(target_expr, cst.Name) else None
            exclusive = name is not None and self.is_exclusive(name, target, state)
            through_view = name in self.view_names and self.shares_storage(name, target, state)
            self.emit(form, site, f"{action} `{written}` in place", hazard, target_expr, exclusive, through_view)
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
        path, span_of = self.ctx.path, self.ctx.span_of
        if target.grad is Grad.LEAF and self.grad_enabled:
            origin = target.origin
            return Hazard(True, lambda: leaf_reason(path, origin, span_of))
        if target.multi_view is not None and target.grad > Grad.NO and self.grad_enabled:
            method, origin = target.multi_view, target.origin
            return Hazard(target.grad > Grad.UNKNOWN, lambda: multi_view_reason(method, span_of(origin)))
        records = state.saves_of(target)
        if not records:
            return None
        certain = [record for record in records if record.certain]
        shown = certain or records
        if target.hidden is not None:
            how = target.hidden
            return Hazard(bool(certain), lambda: hidden_reason(path, how, shown, span_of))
        written_at = site.node if self.report is self.ctx else None  # loop order only means something within one file
        return Hazard(bool(certain), lambda: saved_reason(path, written, shown, written_at, span_of))

    def is_exclusive(self, name: str, target: Val, state: State) -> bool:
        """A local that is not an argument and shares its storage with no other live name."""
        return not target.storages & self.caller_storages and not self.shares_storage(name, target, state)

    def shares_storage(self, name: str, target: Val, state: State) -> bool:
        return any(other != name and isinstance(value, Val) and value.storages & target.storages for other, value in state.env.items())

    def is_view_expression(self, expr: cst.BaseExpression) -> bool:
        """`out[1:]`, `out.T`, `out.view(...)`: what is written through it lands in `out`."""
        if isinstance(expr, cst.Subscript):
            return not string_index(expr)
        if isinstance(expr, cst.Attribute):
            return expr.attr.value in self.facts.view_attributes
        return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in self.facts.view_methods

    def emit(
        self, form: Form, site: Site, action: str, hazard: Hazard, target: cst.CSTNode | None = None, exclusive: bool = False, through_view: bool = False
    ) -> None:
        if site.path != self.report.path:
            return  # reported when the file it lives in is checked
        if self.report is not self.ctx:
            action = f"{action} (called from {Path(self.ctx.path).name})"
        self.sink.setdefault(
            (id(site.node), form),
            Mutation(
                form=form,
                node=site.node,
                action=action,
                locate=partial(self.report.span_of, site.node),
                explain=hazard.reason,
                certain=hazard.certain,
                target=target if site.path == self.ctx.path else None,
                exclusive=exclusive and site.path == self.ctx.path,
                through_view=through_view,
            ),
        )

    # ----------------------------------------------------------------- helpers

    def new_tensor(self, inputs: Sequence[Value], grad: Grad | None = None) -> Val:
        if grad is None:
            grad = min(max((grad_of(value) for value in inputs), default=Grad.NO), Grad.MAYBE) if self.grad_enabled else Grad.NO
        return Val(fresh_storage(), grad, dtype=self.autocast)

    def grad_mode_of(self, expr: cst.BaseExpression) -> bool | None:
        target = expr.func if isinstance(expr, cst.Call) else expr
        qualname = self.ctx.imports.qualname(target)
        if qualname in GRAD_OFF:
            return False
        if qualname in GRAD_ON:
            return True
        if qualname in SET_GRAD and isinstance(expr, cst.Call) and expr.args:
            return literal(expr.args[0].value)
        return None

    def autocast_of(self, expr: cst.BaseExpression) -> str | None:
        """The low-precision dtype an autocast region computes in ("" when it is disabled)."""
        if not isinstance(expr, cst.Call) or self.ctx.imports.qualname(expr.func) not in AUTOCAST:
            return None
        for arg in expr.args:
            if keyword_of(arg) == "enabled" and literal(arg.value) is False:
                return ""
            if keyword_of(arg) == "dtype":
                return dtype_name(arg.value) or "float16"
        device = next((arg.value for arg in expr.args if arg.keyword is None or keyword_of(arg) == "device_type"), None)
        on_cpu = isinstance(device, cst.SimpleString) and "cpu" in device.value or "cpu" in (self.ctx.imports.qualname(expr.func) or "")
        return "bfloat16" if on_cpu else "float16"


def summarize(project: Project, ctx: FileContext, func: cst.FunctionDef, cls: ClassInfo | None) -> Summary:
    """Run `func` with a symbolic tensor in every parameter and record what it does to them."""
    params = list(func.params.posonly_params) + list(func.params.params) + list(func.params.kwonly_params)
    if cls is not None and params and not any(dotted(d.decorator) == "staticmethod" for d in func.decorators):
        params = params[1:]
    elif cls is not None and cls.is_autograd_function and params:
        params = params[1:]  # ctx
    # Unknown grad: a save that needs an argument to require grad stays uncertain in the summary,
    # and the call site decides from what it passes; saves for the callee's own weights stay certain.
    symbolic = {param.name.value: Val(fresh_storage(), Grad.UNKNOWN) for param in params}
    recorder = SummaryRecorder({name: value.storages for name, value in symbolic.items()})
    interpreter = FunctionInterpreter(project, ctx, cls, {}, recorder)
    interpreter.run_function(func, symbolic)
    return recorder.summary
