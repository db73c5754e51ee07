"""A small abstract interpreter over one function body, tracking tensors by storage.

It walks statements in order, keeps for every name what it may hold (`values.Val`), records
which storages autograd saved for backward (from the op table generated from torch), and asks
`report` about every in-place write. Branches are merged conservatively; loop bodies run
twice so that state carried from one iteration into the next (an RNN hidden state) is seen;
code under `torch.no_grad()` and friends records nothing and reports nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import libcst as cst

from ..diagnostics import Span
from .classes import ClassInfo
from .hazards import Hazard, leaf_hazard, message, saved_hazard
from .imports import Imports, dotted
from .model import Form, Mutation
from .torch_facts import TorchFacts
from .values import NOT_TENSOR, Grad, ModuleRef, SaveRecord, State, Val, Value, fresh_storage, merge_states, merge_values

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
# Conversions return `self` when there is nothing to convert: the result may alias.
# dtype/device shorthands for `.to()`, which returns `self` when nothing needs converting.
_CONVERSION_METHODS = frozenset(
    {"type", "type_as", "float", "double", "half", "bfloat16", "int", "long", "short", "bool", "byte", "char", "cuda", "pin_memory"}
)
_NON_CONTIGUOUS_VIEWS = frozenset({"transpose", "permute", "t", "T", "mT", "H", "mH", "movedim", "swapaxes", "swapdims", "expand", "expand_as"})
_GRAD_OFF = frozenset({"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.inference_mode"})
_GRAD_ON = frozenset({"torch.enable_grad", "torch.autograd.enable_grad"})
_SET_GRAD = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled"})
# In-place helpers that run under no_grad themselves and are meant for initialisation.
_SAFE_INPLACE_PREFIXES = ("torch.nn.init.",)
_MAX_LOOP_NESTING = 3


@dataclass(frozen=True)
class FileContext:
    path: str
    imports: Imports
    facts: TorchFacts
    span_of: Callable[[cst.CSTNode], Span]
    code_of: Callable[[cst.CSTNode], str]


class FunctionInterpreter:
    def __init__(self, ctx: FileContext, cls: ClassInfo | None, sink: dict[tuple[int, Form], Mutation]) -> None:
        self.ctx = ctx
        self.facts = ctx.facts
        self.cls = cls
        self.sink = sink
        self.grad_enabled = True
        self.loop_depth = 0
        self.jumps: list[list[State]] = []

    # ----------------------------------------------------------------- entry points

    def run_function(self, func: cst.FunctionDef, tensor_params: dict[str, Grad], grad_enabled: bool) -> None:
        state = State()
        for name, grad in tensor_params.items():
            state.env[name] = Val(fresh_storage(), grad, origin=self.ctx.span_of(func))
        self.grad_enabled = grad_enabled
        self.exec_block(func.body, state)

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
        elif isinstance(small, (cst.Return, cst.Raise)):
            if small.__class__ is cst.Return and small.value is not None:
                self.eval(small.value, state)
            state.dead = True
        elif isinstance(small, (cst.Break, cst.Continue)):
            if self.jumps:
                self.jumps[-1].append(state.copy())
            state.dead = True
        elif isinstance(small, cst.Del):
            for name in _names_in(small.target):
                state.env.pop(name, None)
        return state

    def eval_statement_expression(self, expr: cst.BaseExpression, state: State) -> None:
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
        if isinstance(node, cst.For):
            iterable = self.eval(node.iter, state)
        else:
            self.eval(node.test, state)
        rounds = 2 if self.loop_depth < _MAX_LOOP_NESTING else 1
        self.loop_depth += 1
        entry = state
        exits = [state]
        current = state
        for _ in range(rounds):
            current = current.copy()
            if isinstance(node, cst.For):
                self.assign(node.target, _element_of(iterable), current, node)
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
        saved_mode = self.grad_enabled
        for item in node.items:
            mode = self.grad_mode_of(item.item)
            if mode is not None:
                self.grad_enabled = mode
            else:
                value = self.eval(item.item, state)
                if item.asname is not None:
                    self.assign(item.asname.name, value, state, node)
        state = self.exec_block(node.body, state)
        self.grad_enabled = saved_mode
        return state

    def exec_try(self, node: cst.Try | cst.TryStar, state: State) -> State:
        before = state.copy()
        after_body = self.exec_block(node.body, state)
        outcomes = []
        for handler in node.handlers:
            outcomes.append(self.exec_block(handler.body, merge_states([before, after_body.copy()])))
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
        if isinstance(target, cst.Subscript):
            base = self.eval(target.value, state)
            self.eval_slices(target, state)
            if isinstance(base, Val) and base.is_tensor:
                self.write(Form.INDEX_ASSIGN, node, target.value, base, state, f"`{self.ctx.code_of(target)} {_aug_symbol(node)} ...` writes into")
            return
        current = self.eval(target, state)
        if not (isinstance(current, Val) and current.is_tensor):
            # Python numbers, lists, ...: `n += 1` rebinds, nothing is written in place.
            self.assign(target, NOT_TENSOR if not isinstance(operand, Val) or not operand.is_tensor else self.new_tensor([operand]), state, node)
            return
        op, _ = _AUGMENTED_OPS[type(node.operator)]
        self.write(Form.AUG_ASSIGN, node, target, current, state, f"`{self.ctx.code_of(target)} {_aug_symbol(node)} ...` modifies")
        self.record_inplace_op(op, _aug_symbol(node), current, {"other": operand}, node, state)

    def assign(self, target: cst.BaseExpression, value: Value, state: State, statement: cst.CSTNode) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            elements = [element.value for element in target.elements]
            for index, element in enumerate(elements):
                if isinstance(element, cst.StarredElement):
                    self.assign(element.value, NOT_TENSOR, state, statement)
                else:
                    self.assign(element, _item(value, index), state, statement)
            return
        if isinstance(target, cst.Subscript):
            base = self.eval(target.value, state)
            self.eval_slices(target, state)
            if isinstance(base, Val) and base.is_tensor:
                self.write(Form.INDEX_ASSIGN, statement, target.value, base, state, f"`{self.ctx.code_of(target)} = ...` writes into")
            return
        name = dotted(target)
        if name is not None:
            state.env[name] = value
            # Rebinding `a` makes everything known about `a.b` stale.
            prefix = name + "."
            for key in [key for key in state.env if key.startswith(prefix)]:
                del state.env[key]

    # ----------------------------------------------------------------- expressions

    def eval(self, expr: cst.BaseExpression, state: State) -> Value:
        if isinstance(expr, cst.Name):
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
            self.eval(expr.left, state)
            operands = [self.eval(target.comparator, state) for target in expr.comparisons]
            return self.new_tensor([], grad=Grad.NO) if any(map(_is_tensor, operands)) else NOT_TENSOR
        if isinstance(expr, cst.BooleanOperation):
            self.eval(expr.left, state)
            self.eval(expr.right, state)
            return NOT_TENSOR
        if isinstance(expr, (cst.Dict, cst.Set, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp, cst.Await)):
            for child in expr.children:
                if isinstance(child, cst.BaseExpression):
                    self.eval(child, state)
            return NOT_TENSOR
        return NOT_TENSOR

    def eval_attribute(self, expr: cst.Attribute, state: State) -> Value:
        name = dotted(expr)
        if name is not None and name in state.env:
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
        if attr in self.facts.view_attributes:
            view = base.view(strided=attr in _NON_CONTIGUOUS_VIEWS)
            return view.detached() if attr == "data" else view
        if attr == "grad":
            return Val(fresh_storage(), Grad.NO, origin=self.ctx.span_of(expr))
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
        if isinstance(base, Val) and base.items is not None and len(expr.slice) == 1:
            index = expr.slice[0].slice
            if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer):
                return _item(base, int(index.value.value, 0))
            return _element_of(base)
        if not _is_tensor(base):
            return NOT_TENSOR
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
        if op in _COMMUTATIVE and not _is_tensor(left):
            left, right = right, left
        result = self.new_tensor([left, right])
        if op is not None:
            self.record_op(op, f"{symbol}", {"self": left, self.second_param(op): right}, result, expr, state, _operand_texts(self.ctx, expr))
        return result

    def second_param(self, op: str) -> str:
        facts = self.facts.ops.get(op)
        return facts.params[1] if facts is not None and len(facts.params) > 1 else "other"

    def eval_call(self, call: cst.Call, state: State) -> Value:
        func = call.func
        args = [self.eval(arg.value, state) for arg in call.args]
        qualname = self.ctx.imports.qualname(func)
        if qualname is not None and (qualname.startswith("torch.") or qualname == "torch"):
            return self.call_torch(qualname, call, args, state)
        if isinstance(func, cst.Attribute):
            if _is_self(func.value) or dotted(func) in state.env:
                callee = self.eval_attribute(func, state)
                if isinstance(callee, ModuleRef):
                    return self.call_module(callee, call, args, state)
            receiver = self.eval(func.value, state)
            if _is_tensor(receiver):
                return self.call_method(receiver, func.attr.value, call, args, state)
            if _is_self(func.value):
                # A submodule or method of this class whose definition is not known here.
                return self.new_tensor(args) if any(map(_is_tensor, args)) else NOT_TENSOR
            return NOT_TENSOR
        callee = self.eval(func, state)
        if isinstance(callee, ModuleRef):
            return self.call_module(callee, call, args, state)
        return NOT_TENSOR

    def call_torch(self, qualname: str, call: cst.Call, args: list[Value], state: State) -> Value:
        if qualname.startswith(_SAFE_INPLACE_PREFIXES):
            return NOT_TENSOR
        if qualname == "torch.nn.Parameter":
            return Val(fresh_storage(), Grad.LEAF, origin=self.ctx.span_of(call))
        short = qualname.rsplit(".", 1)[-1]
        namespace = qualname[: -len(short) - 1]
        if namespace not in ("torch", "torch.nn.functional", "torch.special", "torch.linalg", "torch.fft"):
            return NOT_TENSOR
        if namespace == "torch" and self.facts.is_factory(short):
            requires_grad = any(arg.keyword is not None and arg.keyword.value == "requires_grad" and _literal(arg.value) for arg in call.args)
            return Val(fresh_storage(), Grad.LEAF if requires_grad and self.grad_enabled else Grad.NO, origin=self.ctx.span_of(call))
        tensors = [arg for arg in args if _is_tensor(arg)]
        if namespace == "torch" and short not in self.facts.tensor_functions and short not in self.facts.ops:
            return NOT_TENSOR
        if not tensors and namespace != "torch":
            return NOT_TENSOR
        op = short
        bound = self.bind(op, call, args)
        result = self.new_tensor(tensors)
        self.record_op(op, qualname_label(self.ctx, call), bound, result, call, state, _argument_texts(self.ctx, call, op, self.facts))
        return result

    def call_method(self, receiver: Val, method: str, call: cst.Call, args: list[Value], state: State) -> Value:
        if method in self.facts.inplace_methods:
            self.write(Form.METHOD, call, call.func.value, receiver, state, f"`{self.ctx.code_of(call.func)}()` modifies")  # type: ignore[attr-defined]
            twin = self.facts.inplace_methods[method]
            if twin is not None:
                bound = self.bind(twin, call, args, receiver)
                bound.pop("self", None)
                self.record_inplace_op(twin, f".{method}()", receiver, bound, call, state)
            return receiver
        if method in self.facts.view_methods:
            view = receiver.view(strided=method in _NON_CONTIGUOUS_VIEWS)
            return view.detached() if method == "detach" else view
        if method in self.facts.multi_view_methods:
            return receiver.view(strided=True)
        if method in _NON_TENSOR_METHODS:
            return NOT_TENSOR
        if method.startswith("new_"):
            return Val(fresh_storage(), Grad.NO, origin=self.ctx.span_of(call))
        if method == "contiguous" and receiver.strided:
            return self.new_tensor([receiver])
        if method in self.facts.self_returning_methods or method in _CONVERSION_METHODS:
            return receiver.view()
        result = self.new_tensor([receiver, *args])
        if method in self.facts.ops:
            bound = self.bind(method, call, args, receiver)
            self.record_op(method, f".{method}()", bound, result, call, state, {"self": self.ctx.code_of(call.func.value)})  # type: ignore[attr-defined]
        return result

    def call_module(self, module: ModuleRef, call: cst.Call, args: list[Value], state: State) -> Value:
        value = args[0] if args else NOT_TENSOR
        if module.items is not None and module.kind == "Sequential":
            for item in module.items:
                value = self.apply_module(item, call, value, state)
            return value
        return self.apply_module(module, call, value, state)

    def apply_module(self, module: ModuleRef, call: cst.Call, value: Value, state: State) -> Value:
        label = f"{self.ctx.code_of(call.func)}" + (f" ({module.kind})" if module.kind else "")
        if module.kind is None or not _is_tensor(value):
            return self.new_tensor([value]) if _is_tensor(value) or module.kind is None else NOT_TENSOR
        saves = self.facts.module_saves.get(module.kind, frozenset())
        if module.inplace:
            self.write(Form.INPLACE_ACTIVATION, call, call.args[0].value if call.args else call, value, state, f"`{label}` (inplace=True) modifies")
            result = value
        else:
            result = self.new_tensor([value])
        if self.grad_enabled:
            span = self.ctx.span_of(call)
            if "input" in saves:
                # Saved for the module's own weight gradient, whatever the input is.
                argument = self.ctx.code_of(call.args[0].value) if call.args else "its input"
                state.add_save(value, SaveRecord(label, argument, span, certain=True))
            if "result" in saves and value.grad > Grad.NO:
                state.add_save(result, SaveRecord(label, "its result", span, certain=value.grad > Grad.UNKNOWN))
        return result

    # ----------------------------------------------------------------- saves and writes

    def bind(self, op: str, call: cst.Call, args: list[Value], receiver: Val | None = None) -> dict[str, Value]:
        facts = self.facts.ops.get(op)
        params = list(facts.params) if facts is not None else []
        bound: dict[str, Value] = {}
        if receiver is not None:
            bound["self"] = receiver
            params = [param for param in params if param != "self"]
        positional = iter(params)
        for arg, value in zip(call.args, args):
            if arg.keyword is not None:
                bound[arg.keyword.value] = value
            elif arg.star == "":
                name = next(positional, None)
                if name is not None:
                    bound[name] = value
        return bound

    def record_op(
        self, op: str, label: str, bound: dict[str, Value], result: Val, node: cst.CSTNode, state: State, texts: dict[str, str], inplace: bool = False
    ) -> None:
        facts = self.facts.ops.get(op)
        if facts is None or not self.grad_enabled:
            return
        span = self.ctx.span_of(node)
        for saved, triggers in facts.saves.items():
            if saved == "self" and inplace:
                continue  # autograd saves a clone of the original `self` of an in-place op
            grads = [_grad(bound.get(trigger)) for trigger in triggers]
            if max(grads, default=Grad.NO) is Grad.NO:
                continue
            target = result if saved == "result" else bound.get(saved)
            if isinstance(target, Val) and target.is_tensor:
                what = "its result" if saved == "result" else texts.get(saved, saved)
                state.add_save(target, SaveRecord(label, what, span, certain=max(grads) > Grad.UNKNOWN))

    def record_inplace_op(self, op: str, label: str, target: Val, others: dict[str, Value], node: cst.CSTNode, state: State) -> None:
        """An in-place op saves like its out-of-place twin, its result being the tensor it wrote."""
        bound: dict[str, Value] = {"self": target, **others}
        self.record_op(op, label, bound, target, node, state, {}, inplace=True)

    def write(self, form: Form, node: cst.CSTNode, target_expr: cst.CSTNode, target: Val, state: State, action: str) -> None:
        if not target.is_tensor:
            return
        written = self.ctx.code_of(target_expr)
        span = self.ctx.span_of(node)
        hazard: Hazard | None = None
        certain = True
        # no_grad stops recording, not version counting: a write there to a tensor saved
        # earlier still raises at backward; only leaves may be written freely.
        if target.grad is Grad.LEAF and self.grad_enabled:
            hazard = leaf_hazard(self.ctx.path, target.origin)
        else:
            records = state.saves_of(target)
            if records:
                certain_records = [record for record in records if record.certain]
                certain = bool(certain_records)
                hazard = saved_hazard(self.ctx.path, written, certain_records or records, span)
        if hazard is None:
            return
        key = (id(node), form)
        if key in self.sink:
            return
        self.sink[key] = Mutation(
            form=form,
            node=node,
            span=span,
            message=message(f"{action} `{written}` in place", hazard),
            consequence=hazard.consequence,
            related=hazard.related,
            help=f"write it out of place, or `{written} = {written}.clone()` before the in-place write",
            certain=certain,
        )

    # ----------------------------------------------------------------- helpers

    def new_tensor(self, inputs: Sequence[Value], grad: Grad | None = None) -> Val:
        if grad is None:
            grad = min(max((_grad(value) for value in inputs), default=Grad.NO), Grad.MAYBE) if self.grad_enabled else Grad.NO
        return Val(fresh_storage(), grad)

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


def qualname_label(ctx: FileContext, call: cst.Call) -> str:
    return ctx.code_of(call.func)


def _argument_texts(ctx: FileContext, call: cst.Call, op: str, facts: TorchFacts) -> dict[str, str]:
    params = list(facts.ops[op].params) if op in facts.ops else []
    texts: dict[str, str] = {}
    positional = iter(params)
    for arg in call.args:
        name = arg.keyword.value if arg.keyword is not None else next(positional, None)
        if name is not None:
            texts[name] = ctx.code_of(arg.value)
    return texts


def _operand_texts(ctx: FileContext, expr: cst.BinaryOperation) -> dict[str, str]:
    left, right = ctx.code_of(expr.left), ctx.code_of(expr.right)
    return {"self": left, "other": right, "exponent": right}


def _aug_symbol(node: cst.AugAssign) -> str:
    return _AUGMENTED_OPS[type(node.operator)][1]


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
    if isinstance(value, Val) and value.is_tensor:
        return value.view()
    if isinstance(value, Val) and value.items:
        merged: Value = value.items[0]
        for item in value.items[1:]:
            merged = merge_values(merged, item)
        return merged
    return NOT_TENSOR


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
