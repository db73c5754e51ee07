"""A small abstract interpreter over one function body, for construction as for computation.

It walks statements in order and keeps for every name what it may hold (`values`): tensors by
storage, and the Python values construction code works with (constants, classes, modules,
dicts, lists). It records which storages autograd saved for backward (from the op table
generated from torch) and asks `write` about every in-place write. A branch it can decide (a
constant, a configuration value a caller passed) runs one way; one it cannot runs both ways,
each side assuming its test, so a value that differs between them becomes a `Choice` and a
finding made on one side carries that side's condition. Loop bodies run twice, so that state
carried from one iteration into the next (an RNN hidden state) is seen; a loop over a container
known to be non-empty runs at least once. Code under `torch.no_grad()` records nothing. Calls
are `calls.CallEvaluator`'s business.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import libcst as cst

from ..diagnostics import Related, Span
from .autograd_function import FunctionContract
from .calls import CallEvaluator, dtype_name
from .classes import ClassInfo, FunctionRef
from .conditions import RECORDING, TRAINING, Assumption, Condition, against_defaults, consistent, records_nothing
from .hazards import (
    Hazard,
    expanded_reason,
    hidden_reason,
    hooked_reason,
    inference_reason,
    kept_reason,
    leaf_reason,
    multi_view_reason,
    overlap_reason,
    saved_reason,
    stale_reason,
)
from .imports import dotted
from .instances import Instance
from .model import Form, Mutation, Reason
from .params import function_inference_mode
from .project import FileContext
from .protocols import Engine
from .python_types import may_contain, same_object
from .state import NO_HOOKS, PendingWrite, SaveRecord, Site, State, merge_states, next_order
from .summaries import Summary, SummaryRecorder
from .syntax import (
    evaluated_literal,
    is_self,
    keyword_of,
    literal,
    names_in,
    names_read,
    never_tensor_operand,
    operand_exprs,
    positional_params,
    spread_names,
    string_index,
)
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
    Partial,
    Sym,
    Val,
    Value,
    as_tensor,
    collapse,
    element_of,
    fresh_id,
    fresh_storage,
    grad_of,
    graph_of,
    in_round,
    is_container,
    is_project_object,
    is_tensor,
    is_tensor_val,
    item_of,
    merge_all,
    merge_values,
    nonempty,
    options_of,
    other_round,
    reachable,
    slot_of_object,
    tensor_condition,
    tensors_in,
    with_graph,
)
from .vocabulary import AUTOCAST, GRAD_OFF, GRAD_ON, INFERENCE_MODE, METADATA_ATTRIBUTES, SET_GRAD

if TYPE_CHECKING:
    from .torch_facts import OpFacts

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
# Python's own operators on constants, for configuration arithmetic (`dim * 4`, `p > 0`).
_PYTHON_BINARY: dict[type, Callable[[object, object], object]] = {
    cst.Multiply: operator.mul, cst.Divide: operator.truediv, cst.Add: operator.add, cst.Subtract: operator.sub,
    cst.FloorDivide: operator.floordiv, cst.Modulo: operator.mod, cst.Power: operator.pow,
}  # fmt: skip
# Constants of any type: an operator they do not support raises, and the test is not decided.
_COMPARISONS: dict[type, tuple[str, Callable[[Any, Any], bool]]] = {
    cst.Equal: ("==", operator.eq), cst.NotEqual: ("!=", operator.ne), cst.LessThan: ("<", operator.lt),
    cst.LessThanEqual: ("<=", operator.le), cst.GreaterThan: (">", operator.gt), cst.GreaterThanEqual: (">=", operator.ge),
    cst.Is: ("is", operator.is_), cst.IsNot: ("is not", operator.is_not), cst.In: ("in", lambda a, b: a in b),
    cst.NotIn: ("not in", lambda a, b: a not in b),
}  # fmt: skip
# The negative comparisons are assumed as their positive twin not holding.
_POSITIVE = {"!=": "==", "is not": "is", "not in": "in"}
_COMMUTATIVE = frozenset({"mul", "add"})
_MAX_LOOP_NESTING = 3
_MAX_UNROLLED = 16  # items of a known container a loop runs through one by one
# Methods that hand out what the object stores and are called again for the same item (a
# dataset's `__getitem__`, once per epoch): writing what they take from `self` changes it for good.
_ACCESSORS = frozenset({"__getitem__"})
_MAX_EXACT_OPTIONS = 4  # lists a comprehension over known items may build, its filters left open
MAX_CALL_DEPTH = 12
_EVERYTHING: frozenset[int] = frozenset({-1})  # top-level code: whatever it computed may be backwarded


class FunctionInterpreter:
    def __init__(
        self,
        engine: Engine,
        ctx: FileContext,
        cls: ClassInfo | None = None,
        instance: Instance | None = None,
        recorder: SummaryRecorder | None = None,
        constructing: bool = False,
        depth: int = 0,
        grad_enabled: bool = True,
    ) -> None:
        self.engine = engine
        self.project = engine.project
        self.ctx = ctx
        self.facts = ctx.facts
        self.cls = cls
        self.instance = instance
        self.recorder = recorder
        self.constructing = constructing  # running `__init__` or what it calls: bindings of `self` are the point
        self.depth = depth
        # Findings of this run, each with the saves it blames: one whose saving ops feed nothing
        # that leaves the function (only integer indices are returned) cannot raise.
        self.sink: list[tuple[Mutation, frozenset[int]]] = []
        self.escaped: frozenset[int] = frozenset()
        self.returned_graph: frozenset[int] = frozenset()  # the saves the returned values went through
        self.children: list[Summary] = []  # summaries of the runs this one reached
        self.param_storages: frozenset[int] = frozenset()
        self.inherited: dict[int, tuple[str, ...]] = {}
        self.param_names: set[str] = set()
        # Set when an argument nobody passed is used as an object (`tensor.clone()` on an
        # unannotated parameter): what this run proves depends on what callers pass.
        self.blind = False
        self.blind_writes = False  # wrote in place into an argument nobody passed
        # Set when the run writes in place a tensor that requires grad and nothing here forbids
        # it: a caller that puts a full backward hook on the module around it makes that a view
        # torch refuses to write (Grad-CAM tools hooking a layer of the model).
        self.hookable = False
        self.caller_storages: frozenset[int] = frozenset()
        self.view_names: set[str] = set()  # names ever bound to a view of a tensor (`v = out[1:]`)
        # Names a `for` loop binds: `for x in (start, end): x.squeeze_(-1)` writes each element
        # through the loop's name to update it, and its other names are meant to see that.
        self.loop_names: set[str] = set()
        self.copied: frozenset[int] = frozenset()  # storages this run took a `.clone()` of
        self.kept: frozenset[int] = frozenset()  # what the receiver stores, in an accessor that hands it out
        self.contract: FunctionContract | None = None
        self.ctx_name: str | None = None
        self.outer_grad = grad_enabled  # the caller's grad mode: no_grad around the call reaches in
        self.grad_enabled = grad_enabled
        self.inference: tuple[str, Span] | None = None  # where the inference_mode it runs under was entered
        self.running: cst.FunctionDef | None = None
        self.discarded: cst.BaseExpression | None = None
        self.autocast: str | None = None
        self.loop_depth = 0
        self.jumps: list[list[State]] = []
        self.returned: Value | None = None
        self.exits: list[State] = []  # the state at each `return`: what the caller sees after it
        self.yielded: list[Value] = []  # a generator's values, in the order its run yields them
        self.patches: dict[int, Module] = {}  # modules rewritten through an alias (`m.inplace = True`)
        self.extra: Condition = frozenset()  # the option of a `Choice` being called
        self.hooked = NO_HOOKS  # the hooks on modules, from the caller
        self.calls = CallEvaluator(self)

    # ----------------------------------------------------------------- entry points

    def run_function(self, func: FunctionRef, env: dict[str, Value], params: dict[str, Value] | None = None) -> State:
        """Run `func` with `env` bound; `params` (default: all of `env`) are its arguments."""
        params = env if params is None else params
        node = func.node
        state = State(env=dict(env), hooked=self.hooked)
        self.param_storages = (
            frozenset().union(*(reachable(value) for value in params.values())) if params else frozenset()
        )
        self.param_names = set(params)
        # What the caller's tensors already were (a leaf, a view torch forbids writing): a write
        # into one is the caller's finding (TIP007, applied at the call), not this run's.
        self.inherited = {
            storage: _refusal(tensor)
            for value in params.values()
            for tensor in tensors_in(value)
            for storage in tensor.storages
        }
        # What the caller can see: the arguments, and the elements of a `list[Tensor]` argument
        # (an optimizer's states): rebinding a name that holds one of them is not a safe fix.
        self.caller_storages = self.param_storages
        if self.cls is not None and node.name.value in _ACCESSORS:
            self.kept = self.stored_by_receiver(node, params)
        self.grad_enabled = self.outer_grad and self.engine.grad_enabled(self.ctx, node, self.cls)
        self.running = node
        if self.inference is None and function_inference_mode(node, self.ctx.imports):
            self.inference = self.entered_here()
        if self.cls is not None and self.cls.is_autograd_function and node.name.value == "forward":
            positional = positional_params(node)
            self.ctx_name = positional[0].name.value if positional else None
            self.contract = FunctionContract(self.ctx, {name: reachable(value) for name, value in params.items()})
        final = self.exec_block(node.body, state)
        if self.yielded:
            self.returned = Val(items=tuple(self.yielded))  # what its caller's loop iterates
        exits = self.exits if final.dead else [*self.exits, final]
        if exits:
            # `if cond: return a` / `else: return b` leaves a dead state: what the run did to
            # `self`, its arguments' lists and the parameters it saved is on the paths' exits
            # (each return's a copy already; a lone one needs no merge).
            final = exits[0] if len(exits) == 1 else merge_states(exits)
        if self.contract is not None:
            self.sink.extend((mutation, frozenset()) for mutation in self.contract.mutations())
        if self.recorder is not None:
            self.recorder.on_saves(final.saves, reachable(self.returned) if self.returned is not None else frozenset())
        if not final.dead:
            self.escaped |= final.escaped
        # What the caller's own objects hold at the end: a parameter name rebound to a new value
        # (`decoder_input_ids = shift(labels)`) shows the caller nothing.
        self.escaped |= frozenset().union(
            *(
                graph_of(final.env.get(name))
                for name, value in params.items()
                if _same_object(value, final.env.get(name))
            )
        )
        self.final = final
        return final

    def stored_by_receiver(self, node: cst.FunctionDef, params: dict[str, Value]) -> frozenset[int]:
        """The storages of the tensors the receiver's attributes hold (`self.boxes`, a list of
        them): a dataset's samples, which `__getitem__` must hand out as stored."""
        positional = positional_params(node)
        receiver = params.get(positional[0].name.value) if positional else None
        if not isinstance(receiver, Module) or receiver.instance is None:
            return frozenset()
        attributes = (self.calls.module_attribute(receiver, name) for name in receiver.instance.attrs)
        return frozenset(storage for value in attributes for tensor in tensors_in(value) for storage in tensor.storages)

    def run_statements(self, statements: Sequence[cst.BaseStatement], state: State | None = None) -> State:
        self.final = self.exec_statements(statements, state or State())
        self.escaped = _EVERYTHING
        return self.final

    def entered_here(self) -> tuple[str, Span] | None:
        """Where this run's function is defined (None at a module's top level), found by name in
        the file as it is read now: the node run may come from a tree read before and forgotten
        since, and a finding's words must not depend on what the run still holds."""
        node = self.running
        found = self.ctx.body_like(node, self.cls) if node is not None else None
        return (self.ctx.path, self.ctx.span_of(found[0])) if found is not None else None

    def mutations(self, returned_escapes: bool = True) -> list[Mutation]:
        """The findings that can do harm: those whose saving ops feed something that leaves the
        run (`self`, an argument, a backward, code we cannot see, and unless a caller is known to
        decide, its return value)."""
        if self.escaped is _EVERYTHING or self.constructing:
            return [mutation for mutation, _ in self.sink]
        escaped = self.escaped | self.returned_graph if returned_escapes else self.escaped
        return [mutation for mutation, orders in self.sink if not orders or orders & escaped]

    def deferred(self) -> list[Mutation]:
        """The findings whose saving ops feed only the returned value: they can raise only if
        the caller's use of that value reaches a backward (MBart's `shift_tokens_right` result
        is read as token ids by an embedding), which the caller decides."""
        if self.escaped is _EVERYTHING or self.constructing:
            return []
        return [
            mutation
            for mutation, orders in self.sink
            if orders and not orders & self.escaped and orders & self.returned_graph
        ]

    def defer(self, mutations: Sequence[Mutation], result: Value) -> Value:
        """A callee's deferred findings, now this run's: they travel with the call's result,
        under an order of their own that its graph carries on."""
        if not mutations:
            return result
        token = frozenset({next_order()})
        carried = with_graph(result, token)
        orders = token if graph_of(carried) & token else frozenset()  # not carried: they stand
        self.sink.extend((mutation, orders) for mutation in mutations)
        return carried

    # ----------------------------------------------------------------- statements

    def exec_block(self, block: cst.BaseSuite, state: State) -> State:
        if type(block) is cst.SimpleStatementSuite:
            return self.exec_small_statements(block.body, state)
        return self.exec_statements(cast(cst.IndentedBlock, block).body, state)  # the other kind of suite

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
        # Statements and expressions dispatch on exact types: LibCST's classes are ABCs, whose
        # `isinstance` runs in Python, and a parsed tree holds only the concrete classes.
        if type(statement) is cst.SimpleStatementLine:
            return self.exec_small_statements(statement.body, state)
        if type(statement) is cst.If:
            return self.exec_if(statement, state)
        if type(statement) is cst.For or type(statement) is cst.While:
            return self.exec_loop(statement, state)
        if type(statement) is cst.With:
            return self.exec_with(statement, state)
        if type(statement) is cst.Try or type(statement) is cst.TryStar:
            return self.exec_try(statement, state)
        if type(statement) is cst.Match:
            return self.exec_match(statement, state)
        if type(statement) is cst.FunctionDef:
            state.env[statement.name.value] = self.function_value(statement, state)
        return state  # nested class: analysed on its own

    def function_value(self, node: cst.FunctionDef, state: State) -> Func:
        """A function defined here, with the lists and dicts of this scope it fills and the
        project objects and constants it reads (`Func.closure`): `register_module()`'s
        `_register`, returned to a class decorator, registers into its method's `self`."""
        filled = self.ctx.filled(node)
        closure = tuple(
            (name, value)
            for name in sorted(filled | self.ctx.words(node.body).names)
            if (value := state.env.get(name)) is not None
            and ((name in filled and is_container(value)) or is_project_object(value) or type(value) is Const)
        )
        return Func(node.name.value, ref=self.ctx.function_ref(node, None), closure=closure)

    def exec_small(self, small: cst.BaseSmallStatement, state: State) -> State:
        if type(small) is cst.Assign:
            # `view = out` takes a second name for a rewritten tensor and reads none of its values
            # (torch's `out_narrow_view = out`, then narrowed and written, once per shard); stored
            # in a dict or list (`item['img_orig'] = img`) it is kept to be read as it was
            renamed = (
                type(small.value) is cst.Name
                and small.value.value in state.stale
                and all(type(target.target) is cst.Name for target in small.targets)
            )
            value = self.peek(small.value, state) if renamed else self.eval(small.value, state)
            for target in small.targets:
                self.assign(target.target, value, state, small)
        elif type(small) is cst.AnnAssign:
            if small.value is not None:
                self.assign(small.target, self.eval(small.value, state), state, small)
        elif type(small) is cst.AugAssign:
            self.exec_augassign(small, state)
        elif type(small) is cst.Expr:
            self.eval_statement_expression(small.value, state)
        elif isinstance(small, cst.Return):
            self.on_return(self.eval(small.value, state) if small.value is not None else Const(None), small, state)
            state.dead = True
        elif isinstance(small, cst.Raise):
            state.dead = True
        elif isinstance(small, cst.Assert):
            holds, _ = self.branch(small.test, state)
            if holds is None:
                state.dead = True
            else:
                state = holds
        elif isinstance(small, (cst.Break, cst.Continue)):
            if self.jumps:
                self.jumps[-1].append(state.copy())
            state.dead = True
        elif isinstance(small, cst.Del):
            for name in names_in(small.target):
                state.env.pop(name, None)
                state.stale.pop(name, None)
        return state

    def on_return(self, value: Value, node: cst.CSTNode, state: State) -> None:
        self.returned = value if self.returned is None else merge_values(self.returned, value)
        self.exits.append(state.copy())
        if self.recorder is not None:
            self.recorder.on_saves(state.saves, reachable(value))
        if self.contract is not None:
            self.contract.on_return(node, reachable(value))
        self.escaped |= state.escaped
        self.returned_graph |= graph_of(value)

    def on_yield(self, expr: cst.Yield, state: State) -> Value:
        """A value the generator hands its caller's loop, with what it went through; `yield`
        itself evaluates to what `send` passes, nothing known."""
        if isinstance(expr.value, cst.From):
            value = element_of(self.eval(expr.value.item, state))
        else:
            value = self.eval(expr.value, state) if expr.value is not None else Const(None)
        self.yielded.append(value)
        if self.recorder is not None:
            self.recorder.on_saves(state.saves, reachable(value))
        self.escaped |= state.escaped
        self.returned_graph |= graph_of(value)
        return NOT_TENSOR

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
        holds, fails = self.branch(node.test, state)
        outcomes = []
        if holds is not None:
            outcomes.append(self.exec_block(node.body, holds))
        if fails is not None:
            if node.orelse is None:
                outcomes.append(fails)
            elif isinstance(node.orelse, cst.If):
                outcomes.append(self.exec_if(node.orelse, fails))
            else:
                outcomes.append(self.exec_block(node.orelse.body, fails))
        return merge_states(outcomes) if outcomes else State(dead=True)

    def exec_loop(self, node: cst.For | cst.While, state: State) -> State:
        """A loop over a container whose few distinct items are known runs once per item, in
        order (`for m in self.modules()`, a list of different blocks); any other runs two rounds
        (one past nesting depth 3), so that state carried into the next iteration is seen. A
        loop over a container known to hold elements, or `while True`, has no path that skips
        the body. The loop leaves after its last round (and at each `break`/`return`): a loop of
        unknown rounds runs two so that the second sees what the first carried, and the path
        that would leave after the first holds values the second round saved as its inputs
        (`h = act(h); h = conv(h) + residual` saves every sum but the last)."""
        elements: list[Value] = []
        if isinstance(node, cst.For):
            iterable = self.eval_iterable(node.iter, state)
            elements = self.unrolled(node.iter, iterable, state)
            runs_once = nonempty(iterable) or self.counts_up(node.iter, state)
            if not elements:
                element = self.iteration_element(node.iter, iterable, state, unpassed=True)
                rounds = 2 if self.loop_depth < _MAX_LOOP_NESTING else 1
                elements = [in_round(element, (id(node), index)) for index in range(rounds)]
                unrolled = False
            else:
                unrolled = True
        else:
            entered, skipped = self.branch(node.test, state.copy())
            runs_once = skipped is None
            if entered is None:
                return state
            elements = [NOT_TENSOR] * (2 if self.loop_depth < _MAX_LOOP_NESTING else 1)
            unrolled = False
        self.loop_depth += 1
        exits = [] if runs_once else [state]
        current = after = state
        for index, element in enumerate(elements):
            current = current.copy()
            if isinstance(node, cst.For):
                self.assign(node.target, element, current, node)
                self.loop_names.update(names_read(node.target))
                self.param_names.update(  # an element of an argument nobody passed stands for it
                    name for name in names_read(node.target) if isinstance(current.env.get(name), Sym)
                )
            else:
                entered, _ = self.branch(node.test, current)
                if entered is None:
                    break
                current = entered
            self.jumps.append([])
            after = self.exec_block(node.body, current)
            jumps = self.jumps.pop()
            exits.extend(jumps)
            if index == len(elements) - 1:
                exits.append(after)
            current = merge_states([after, *jumps])
            if current.dead:
                break
        self.loop_depth -= 1
        merged = merge_states(exits) if exits else State(dead=True)
        if not unrolled and not merged.dead:
            _keep_grown(state, after, merged)
        if node.orelse is not None and not merged.dead:
            merged = self.exec_block(node.orelse.body, merged)
        return merged

    def unrolled(self, expr: cst.BaseExpression, iterable: Value, state: State) -> list[Value]:
        """The elements a loop binds in order, when its containers' items are known and few:
        `enumerate(xs)`, `reversed(xs)` and `zip(xs, ys)` of containers alike in length too."""
        wrapper = expr.func.value if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) else None
        container = collapse(iterable)
        if wrapper in ("enumerate", "zip", "reversed"):
            parts = (
                [collapse(part) for part in container.items] if isinstance(container, Val) and container.items else []
            )
            known = [_items(part) for part in parts]
            lengths = {len(items) for items in known if items is not None}
            if not known or None in known or len(lengths) != 1 or (wrapper != "zip" and len(known) != 1):
                return []
            columns = cast("list[tuple[Value, ...]]", known)
            if wrapper == "enumerate":
                items: tuple[Value, ...] | None = tuple(
                    Val(items=(Const(i), item)) for i, item in enumerate(columns[0])
                )
            elif wrapper == "reversed":
                items = tuple(reversed(columns[0]))
            else:
                items = tuple(Val(items=row) for row in zip(*columns, strict=True))
        else:
            items = _items(container)
        limit = _MAX_UNROLLED * 4 if self.constructing else _MAX_UNROLLED  # construction handles no tensors: cheap
        if items is None or not 2 <= len(items) <= limit or self.loop_depth >= 2:
            return []
        return list(items)

    def counts_up(self, iterable: cst.BaseExpression, state: State) -> bool:
        """`range(n)` with a known positive count runs at least once."""
        if not (
            isinstance(iterable, cst.Call)
            and isinstance(iterable.func, cst.Name)
            and iterable.func.value == "range"
            and len(iterable.args) == 1
        ):
            return False
        count = self.peek(iterable.args[0].value, state)
        return isinstance(count, Const) and isinstance(count.value, int) and count.value > 0

    @contextmanager
    def modes(self) -> Iterator[None]:
        """Grad mode, autocast and inference mode as they were on the way in, restored on the
        way out (an exception included): a `with torch.no_grad():` block, a callee's write
        replayed under the callee's mode."""
        saved = (self.grad_enabled, self.autocast, self.inference)
        try:
            yield
        finally:
            self.grad_enabled, self.autocast, self.inference = saved

    def exec_with(self, node: cst.With, state: State) -> State:
        with self.modes():
            for item in node.items:
                mode = self.grad_mode_of(item.item)
                if mode is not None:
                    self.grad_enabled = mode
                    if mode is False and self.is_inference_mode(item.item):
                        self.inference = self.entered_here()
                    continue
                autocast = self.autocast_of(item.item)
                if autocast is not None:
                    self.autocast = autocast or None
                    continue
                value = self.eval(item.item, state)
                if item.asname is not None:
                    self.assign(item.asname.name, value, state, node)
            return self.exec_block(node.body, state)

    def exec_try(self, node: cst.Try | cst.TryStar, state: State) -> State:
        before = state.copy()
        after_body = self.exec_block(node.body, state)
        outcomes = [
            self.exec_block(handler.body, merge_states([before, after_body.copy()])) for handler in node.handlers
        ]
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
                current = self.peek(target, state)
                grown = (
                    self.calls.extended(current, operand)
                    if isinstance(known := collapse(current), Val) and known.items is not None
                    else NOT_TENSOR
                )
                self.assign(target, grown, state, node)
            return
        if isinstance(target, cst.Subscript):
            base = self.eval(target.value, state)
            if is_tensor(base) and not string_index(target):
                view = self.eval_subscript(target, state)
                action = f"`{self.ctx.code_of(target)} {symbol} ...` writes into"
                self.inplace_op(
                    Form.INDEX_ASSIGN,
                    node,
                    target.value,
                    as_tensor(base),
                    state,
                    action,
                    op,
                    symbol,
                    {"other": operand},
                    view,
                )
                return
            element = self.eval_subscript(target, state)  # `items[i] += x`: the element tensor, in place
            if is_tensor(element):
                self.inplace_op(
                    Form.AUG_ASSIGN,
                    node,
                    target,
                    as_tensor(element),
                    state,
                    f"`{self.ctx.code_of(target)} {symbol} ...` modifies",
                    op,
                    symbol,
                    {"other": operand},
                )
            else:
                self.store_item(target, self.combine(element, operand, node.operator, node), state, node)
            return
        current = self.eval(target, state)
        if not is_tensor(current):
            # Python numbers, lists, ...: `n += 1` rebinds, nothing is written in place.
            value = (
                self.new_tensor([operand])
                if is_tensor(operand)
                else self.combine(current, operand, node.operator, node)
            )
            self.assign(target, value, state, node)
            return
        self.inplace_op(
            Form.AUG_ASSIGN,
            node,
            target,
            as_tensor(current),
            state,
            f"`{self.ctx.code_of(target)} {symbol} ...` modifies",
            op,
            symbol,
            {"other": operand},
        )

    def inplace_op(
        self,
        form: Form,
        node: cst.CSTNode,
        target_expr: cst.CSTNode,
        target: Val,
        state: State,
        action: str,
        op: str | None,
        label: str,
        others: dict[str, Value],
        written: Value | None = None,
        chain: cst.CSTNode | None = None,
    ) -> None:
        """An in-place op: it saves its operands before it writes (so `x *= x[:, :1]` breaks
        itself) and, like its out-of-place twin, its result after."""
        written_val = collapse(written) if written is not None else target
        bound: dict[str, Value] = {"self": written_val if isinstance(written_val, Val) else target, **others}
        texts = {name: self.ctx.code_of(expr) for name, expr in operand_exprs(node).items()}
        graph = graph_of(Val(items=tuple(others.values())))
        if op is not None:
            graph |= self.record_op(
                op, label, bound, target, node, state, texts, only=lambda saved: saved not in ("self", "result")
            ).graph
        operand = others.get("other")
        overlap = None
        if (
            operand is not None
            and is_tensor(operand)
            and operand is not target
            and as_tensor(operand).storages & target.storages
            and not isinstance(target_expr, cst.Subscript)
        ):
            operand_expr = operand_exprs(node).get("other")
            if operand_expr is not None and self.is_view_expression(operand_expr) and written is None:
                line = self.ctx.span_of(node).start.line
                overlap = overlap_reason(self.ctx.code_of(operand_expr), self.ctx.code_of(target_expr), line)
        self.write(form, node, target_expr, target, state, action, overlap=overlap, chain=chain)
        if op is not None:
            graph |= self.record_op(
                op, label, bound, target, node, state, {}, only=lambda saved: saved == "result"
            ).graph
        gained = max((grad_of(value) for value in others.values()), default=Grad.NO)
        if graph - target.graph or (target.grad is Grad.NO and gained > Grad.NO):
            self.regraph(target, graph, state, gained)

    def regraph(self, target: Val, graph: frozenset[int], state: State, gained: Grad) -> None:
        """After an in-place op the written tensor's value depends on its operands too: it is
        in their graph, and requires grad if it did not and they may (`buffer[i] = x * w`), as
        surely as they do: a zero buffer added an unknown helper's result may not require grad."""
        for name, value in list(state.env.items()):
            if (
                isinstance(value, Val)
                and value.storages & target.storages
                and (not value.graph >= graph or value.grad is Grad.NO)
            ):
                grad = min(gained, Grad.MAYBE) if value.grad is Grad.NO and self.grad_enabled else value.grad
                state.env[name] = replace(value, graph=value.graph | graph, grad=grad, fresh_buffer=False)

    def combine(self, left: Value, right: Value, op: cst.BaseBinaryOp | cst.BaseAugOp, node: cst.CSTNode) -> Value:
        """Python arithmetic on configuration values: constants compute, unknowns stay symbolic."""
        binary = (
            getattr(cst, type(op).__name__.replace("Assign", ""), None) if isinstance(op, cst.BaseAugOp) else type(op)
        )
        function = _PYTHON_BINARY.get(binary) if binary is not None else None
        left, right = collapse(left), collapse(right)
        if function is None:
            return NOT_TENSOR
        if isinstance(left, Const) and isinstance(right, Const):
            try:
                return Const(function(left.value, right.value))
            except Exception:
                return NOT_TENSOR
        if isinstance(left, (Sym, Const)) and isinstance(right, (Sym, Const)):
            text = self.ctx.code_of(node.value if isinstance(node, cst.AugAssign) else node)
            defaults = [side.default if isinstance(side, Sym) else side for side in (left, right)]
            default = None
            first, second = defaults
            if isinstance(first, Const) and isinstance(second, Const):
                try:
                    default = Const(function(first.value, second.value))
                except Exception:
                    default = None
            return Sym(text, default)
        return NOT_TENSOR

    def assign(self, target: cst.BaseExpression, value: Value, state: State, statement: cst.CSTNode) -> None:
        if type(target) is cst.Tuple or type(target) is cst.List:
            value = collapse(value) if not isinstance(value, Choice) else value
            for index, element in enumerate(element.value for element in target.elements):
                if isinstance(element, cst.StarredElement):
                    self.assign(element.value, NOT_TENSOR, state, statement)
                elif isinstance(value, Val) and value.is_tensor and value.items is None and not value.multi_view:
                    # `a, b = f(x)`: a tuple-returning op or module gives different tensors
                    self.assign(element, value.part(), state, statement)
                else:
                    self.assign(element, item_of(value, index), state, statement)
            return
        if type(target) is cst.Subscript:
            base = self.eval(target.value, state)
            self.note_blind(target.value, base, writes=True)  # `pitch[mask] = nan` on an argument nobody passed
            self.eval_slices(target, state)
            if is_tensor(base) and not string_index(target) and not self.slot_of_opaque(base, target, state):
                self.write(
                    Form.INDEX_ASSIGN,
                    statement,
                    target.value,
                    as_tensor(base),
                    state,
                    f"`{self.ctx.code_of(target)} = ...` writes into",
                    condition=tensor_condition(base),
                )
                if graph_of(value) or grad_of(value) > Grad.NO:
                    self.regraph(as_tensor(base), graph_of(value), state, grad_of(value))
                return
            self.store_item(target, value, state, statement)
            return
        if (
            isinstance(target, cst.Attribute)
            and target.attr.value == "requires_grad"
            and is_tensor(self.peek(target.value, state))
        ):
            owner_name = dotted(target.value)
            if owner_name is not None and _truth(collapse(value)) is not None:
                # `tensor.requires_grad = True`: a leaf that requires grad from here on.
                grad = Grad.LEAF if _truth(collapse(value)) else Grad.NO
                state.env[owner_name] = replace(as_tensor(self.peek(target.value, state)), grad=grad, origin=statement)
            return
        if isinstance(target, cst.Attribute) and dotted(target.value) != "self":
            owner = self.peek(target.value, state)
            if any(isinstance(option, Module) for _, option in options_of(owner)):
                self.patch_module(target.value, owner, target.attr.value, value, statement, state)
        name = dotted(target)
        if name is not None:
            if name.startswith("self.") and isinstance(value, Val) and value.is_tensor and not self.constructing:
                state.escaped |= value.graph  # kept on the module: someone may backward through it later
            state.env[name] = value
            state.stale.pop(name, None)
            if isinstance(statement, cst.Assign) and is_tensor(value) and self.is_view_expression(statement.value):
                self.view_names.add(name)
            # Rebinding `a` makes everything known about `a.b` stale.
            prefix = name + "."
            for key in [key for key in state.env if key.startswith(prefix)]:
                del state.env[key]

    def patch_module(
        self,
        owner_expr: cst.BaseExpression,
        owner: Value,
        attr: str,
        value: Value,
        statement: cst.CSTNode,
        state: State,
    ) -> None:
        """`m.inplace = True` on modules reached through an alias (`for m in self.modules()`):
        every module the alias may be is rewritten where it is held."""
        rebuilt = []
        for condition, option in options_of(owner):
            if not isinstance(option, Module):
                continue
            changed = self.calls.modules.with_attribute(option, attr, value, statement, state)
            if changed is not None:
                self.patches[option.ident] = changed
                rebuilt.append((condition, changed))
        name = dotted(owner_expr)
        if name is not None and rebuilt:
            state.env[name] = rebuilt[0][1] if len(rebuilt) == 1 else Choice(tuple(rebuilt))

    def slot_of_opaque(self, base: Value, target: cst.Subscript, state: State) -> bool:
        """`xs[i] = v` into what code we cannot see returned, by one index that is no tensor: a
        list of tensors as likely as a tensor (reading `xs[i]` gives an element), so it rebinds
        a slot."""
        known = collapse(base)
        index = target.slice[0].slice if len(target.slice) == 1 else None
        return (
            isinstance(known, Val)
            and known.opaque
            and isinstance(index, cst.Index)
            and isinstance(index.value, (cst.Name, cst.Integer, cst.UnaryOperation))
            and not is_tensor(self.peek(index.value, state))
        )

    def store_item(self, target: cst.Subscript, value: Value, state: State, statement: cst.CSTNode) -> None:
        """`d["k"] = v`, `xs[i] = v`: a list or dict of the function's own, rebound with the item."""
        container = collapse(self.peek(target.value, state))
        index = target.slice[0].slice if len(target.slice) == 1 else None
        key = self.peek(index.value, state) if isinstance(index, cst.Index) else None
        if isinstance(container, DictVal):
            updated: Value = (
                container.set(key.value, value)
                if isinstance(key, Const)
                else replace(container, rest=merge_values(container.rest, value))
            )
        elif isinstance(container, Val) and container.items is not None and not container.is_tensor:
            items = list(container.items)
            if isinstance(key, Const) and isinstance(key.value, int) and -len(items) <= key.value < len(items):
                items[key.value] = value
            else:
                items = [merge_values(item, value) for item in items]  # which slot is not known
            updated = replace(container, items=tuple(items))
        else:
            if not isinstance(container, Val) or container.is_tensor:
                state.escaped |= graph_of(value)
            return
        self.rebind_container(target.value, container, updated, state)

    def rebind_container(self, expr: cst.BaseExpression, old: Value, new: Value, state: State) -> None:
        """Every name holding the same list or dict sees the change (`append` through an alias)."""
        self.rebind_named(dotted(expr), old, new, state)

    def rebind_named(self, name: str | None, old: Value, new: Value, state: State) -> None:
        cell = getattr(old, "cell", None)
        if name is not None:
            state.env[name] = new
        if cell is None:
            return
        for other, value in list(state.env.items()):
            if getattr(value, "cell", None) == cell and other != name:
                state.env[other] = new

    # ----------------------------------------------------------------- branches

    def branch(self, test: cst.BaseExpression, state: State) -> tuple[State | None, State | None]:
        """The states in which `test` holds and fails (None: that side cannot happen)."""
        if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
            holds, fails = self.branch(test.expression, state)
            return fails, holds
        if type(test) is cst.BooleanOperation:
            left_holds, left_fails = self.branch(test.left, state)
            if isinstance(test.operator, cst.And):
                right_holds, right_fails = (
                    self.branch(test.right, left_holds) if left_holds is not None else (None, None)
                )
                return right_holds, _merged(left_fails, right_fails)
            right_holds, right_fails = self.branch(test.right, left_fails) if left_fails is not None else (None, None)
            return _merged(left_holds, right_holds), right_fails
        return self.decide(test, state)

    def decide(self, test: cst.BaseExpression, state: State) -> tuple[State | None, State | None]:
        grad_test = _grad_test(test)
        if grad_test is not None:
            subject, attribute, negated = grad_test
            decided = self.decide_grad(subject, attribute, state)
            if decided is not None:
                return decided[::-1] if negated else decided
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            comparison = test.comparisons[0]
            evaluate = self.unread if isinstance(comparison.operator, (cst.Is, cst.IsNot)) else self.eval
            left = evaluate(test.left, state)
            right = evaluate(comparison.comparator, state)
            symbol, compare = _COMPARISONS.get(type(comparison.operator), ("", None))
            if compare is None:
                return state.copy(), state
            holds, fails = self.split(
                test,
                test.left,
                left,
                state,
                lambda value: _compare(compare, symbol, value, right),
                _subject_test(symbol, right),
            )
            emptied = _emptiness_subject(test)
            if holds is not None and emptied is not None and is_tensor_val(value := holds.env.get(emptied)):
                # `if x.shape[0] == 0: return x`: an empty tensor, whose writes change nothing
                # anyone reads; it aliases no caller's values on that side.
                holds.env[emptied] = Val(fresh_storage(), value.grad, origin=value.origin, graph=value.graph)
            return holds, fails
        if (
            isinstance(test, cst.Call)
            and isinstance(test.func, cst.Name)
            and test.func.value == "isinstance"
            and len(test.args) == 2
        ):
            instance = self.eval(test.args[0].value, state)
            kinds = self.eval(test.args[1].value, state)
            # `if isinstance(m, nn.ReLU):` — on that side `m` is one of the ReLUs it may be.
            return self.split(
                test,
                test.args[0].value,
                instance,
                state,
                lambda option: self.calls.isinstance_verdict(option, kinds),
                None,
            )
        value = self.eval(test, state)
        return self.split(test, test, value, state, _truth, ("", True))

    def decide_grad(
        self, subject: cst.BaseExpression, attribute: str, state: State
    ) -> tuple[State | None, State | None] | None:
        """`if x.grad_fn is not None:` / `if x.requires_grad:` on an activation: the code telling
        training from inference. Autograd records for every activation of a run or for none
        (grad mode and the parameters' flags are global), so the side where `x` records nothing
        assumes no saves anywhere (`RECORDING` false): a save-based hazard there is not one."""
        value = collapse(self.eval(subject, state))
        if not is_tensor(value):
            return None
        assert isinstance(value, Val)
        if value.grad is Grad.NO:
            return None, state
        if value.grad is Grad.LEAF:
            return (state.copy(), None) if attribute == "requires_grad" else (None, state)  # a leaf has no grad_fn
        return self.assumed_both_ways(RECORDING, state)

    @staticmethod
    def assumed_both_ways(assumption: Assumption, state: State) -> tuple[State | None, State | None]:
        """The sides of a test decided only by assuming it: answered where the path already
        assumed it (or its contrary), else a state for each."""
        known = state.assumed.get(assumption.key)
        if known is not None:
            return (state.copy(), None) if known.holds == assumption.holds else (None, state)
        if not consistent(state.condition | {assumption}):
            return None, state
        holds, fails = state.copy(), state.copy()
        holds.assume(assumption)
        fails.assume(assumption.negated())
        return holds, fails

    def split(
        self,
        test: cst.BaseExpression,
        subject_expr: cst.BaseExpression,
        value: Value,
        state: State,
        truth: Callable[[Value], bool | None],
        subject_test: tuple[str, bool] | None,
    ) -> tuple[State | None, State | None]:
        """Decide `truth` of `value` (each option of a `Choice` apart), assume it when not known."""
        options = options_of(value)
        if len(options) > 1:
            holding: list[tuple[Condition, Value]] = []
            failing: list[tuple[Condition, Value]] = []
            for condition, option in options:
                verdict = truth(option)
                assumption = self.assumption(test, subject_expr, option, subject_test) if verdict is None else None
                if assumption is None:
                    if verdict is not False:
                        holding.append((condition, option))
                    if verdict is not True:
                        failing.append((condition, option))
                    continue
                if consistent(condition | {assumption}):
                    holding.append((condition | {assumption}, self.pinned(option, assumption)))
                if consistent(condition | {assumption.negated()}):
                    failing.append((condition | {assumption.negated()}, option))
            return self.refined(subject_expr, holding, state), self.refined(subject_expr, failing, state)
        verdict = truth(value)
        if verdict is not None:
            return (state.copy(), None) if verdict else (None, state)
        assumption = self.assumption(test, subject_expr, value, subject_test)
        if assumption is None:
            return state.copy(), state
        holds, fails = self.assumed_both_ways(assumption, state)
        name = dotted(subject_expr)
        if name is not None and holds is not None and fails is not None:
            holds.env[name] = self.pinned(value, assumption)
        return holds, fails

    @staticmethod
    def pinned(value: Value, assumption: Assumption) -> Value:
        """`if act == "relu":` — on that side `act` is "relu"."""
        if isinstance(value, Sym) and assumption.holds and assumption.test.startswith(("== ", "is ")):
            known = _constant_of(assumption.test)
            if known is not None:
                return Const(known[0])
        return value

    def refined(
        self, subject_expr: cst.BaseExpression, options: list[tuple[Condition, Value]], state: State
    ) -> State | None:
        if not options:
            return None
        refined = state.copy()
        name = dotted(subject_expr)
        if name is not None:
            refined.env[name] = options[0][1] if len(options) == 1 else Choice(tuple(options))
        # What every option assumed holds on the path: `if self.training:` after an `if` that
        # split on it leaves `self.training` a choice of two, and the branch is still one mode.
        for assumption in frozenset.intersection(*(condition for condition, _ in options)):
            known = refined.assumed.get(assumption.key)
            if known is not None and known.holds != assumption.holds:
                return None
            refined.assume(assumption)
        return refined

    def assumption(
        self,
        test: cst.BaseExpression,
        subject_expr: cst.BaseExpression,
        value: Value,
        subject_test: tuple[str, bool] | None,
    ) -> Assumption | None:
        """What a branch on an unknown assumes: on a configuration value (a `Sym`, with its
        default), or on any other stable expression (`self.training`, `config.use_x`), so that
        testing it again on the same path is answered."""
        if subject_test is None:
            return None
        test_text, holds = subject_test
        if isinstance(value, Sym):
            default = value.default
            verdict = None
            if default is not None:
                verdict = self.default_verdict(test, default)
            shown = repr(default.value) if default is not None else None
            if value.text == TRAINING:
                shown = None
            return Assumption(value.text, test_text, holds, shown, verdict is not None and verdict != holds)
        if isinstance(value, Val) and value.is_tensor:
            return None  # data-dependent
        text = dotted(subject_expr)
        if text is None:
            return None
        return Assumption(text, test_text, holds)

    def assumed_truth(self, test: cst.Comparison, subject: Value, subject_test: tuple[str, bool] | None) -> Value:
        """A comparison of a configuration value as a value: True where it holds and False where
        it fails, under the assumption a branch on it makes, so that a helper returning it
        (`exists(dim_in)`: `val is not None`) decides its caller's branch (`Linear if exists(dim_in)
        else Identity` are two modules, not one that is both)."""
        if not isinstance(subject, Sym):
            return NOT_TENSOR
        assumption = self.assumption(test, test.left, subject, subject_test)
        if assumption is None:
            return NOT_TENSOR
        return Choice(((frozenset({assumption}), Const(True)), (frozenset({assumption.negated()}), Const(False))))

    def default_verdict(self, test: cst.BaseExpression, default: Const) -> bool | None:
        """What the test gives when its configuration value takes its default."""
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            comparison = test.comparisons[0]
            symbol, compare = _COMPARISONS.get(type(comparison.operator), ("", None))
            right = self.peek(comparison.comparator, State())
            if compare is None:
                return None
            verdict = _compare(compare, symbol, default, right)
            return None if verdict is None else (verdict if symbol not in _POSITIVE else not verdict)
        return _truth(default)

    # ----------------------------------------------------------------- expressions

    def peek(self, expr: cst.BaseExpression, state: State) -> Value:
        """The value of a simple expression without reading it (no stale-read finding), for the
        bookkeeping of assignments and metadata reads."""
        if isinstance(expr, cst.Name):
            return state.env[expr.value] if expr.value in state.env else self.global_value(expr.value, expr)
        name = dotted(expr) if isinstance(expr, cst.Attribute) else None
        if name is not None and name in state.env:
            return state.env[name]
        if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)) or (
            isinstance(expr, cst.Name)
        ):
            return self.eval(expr, state)
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
            inner = self.peek(expr.expression, state)
            return (
                Const(-inner.value)
                if isinstance(inner, Const) and isinstance(inner.value, (int, float))
                else NOT_TENSOR
            )
        if isinstance(expr, cst.Attribute):
            return self.eval_attribute(expr, state, read=False)
        if isinstance(expr, (cst.Tuple, cst.List)):
            return Val(items=tuple(self.peek(element.value, state) for element in expr.elements))
        return NOT_TENSOR

    def unread(self, expr: cst.BaseExpression, state: State) -> Value:
        """An operand whose values are not read, only its identity or metadata (`a is b`,
        `torch.zeros_like(a)`): a name or attribute there sees no earlier write. Anything else
        is evaluated, for what its calls do."""
        if isinstance(expr, (cst.Name, cst.Attribute)):
            return self.peek(expr, state)
        return self.eval(expr, state)

    def eval(self, expr: cst.BaseExpression, state: State) -> Value:
        # `type(...) is`, not isinstance: LibCST's node classes are ABCs, and an ABC check costs a
        # Python-level call (28 M of them in a timm run; the node classes are never subclassed).
        if type(expr) is cst.Name:
            return self.eval_name(expr, state)
        if type(expr) is cst.Attribute:
            return self.eval_attribute(expr, state)
        if type(expr) is cst.Call:
            return self.calls.eval_call(expr, state)
        if type(expr) is cst.BinaryOperation:
            return self.eval_binary(expr, state)
        if type(expr) is cst.UnaryOperation:
            operand = self.eval(expr.expression, state)
            if isinstance(expr.operator, cst.Not):
                verdict = _truth(operand)
                return Const(not verdict) if verdict is not None else NOT_TENSOR
            if is_tensor(operand):
                return self.new_tensor([operand])
            if (
                isinstance(operand, Const)
                and isinstance(operand.value, (int, float))
                and isinstance(expr.operator, cst.Minus)
            ):
                return Const(-operand.value)
            return NOT_TENSOR
        if type(expr) is cst.Subscript:
            return self.eval_subscript(expr, state)
        if type(expr) is cst.Integer or type(expr) is cst.Float:
            return Const(evaluated_literal(expr.value), origin=expr, origin_path=self.ctx.path)
        if type(expr) is cst.SimpleString or type(expr) is cst.ConcatenatedString:
            evaluated = evaluated_literal(expr.value) if isinstance(expr, cst.SimpleString) else expr.evaluated_value
            return (
                Const(evaluated, origin=expr, origin_path=self.ctx.path) if isinstance(evaluated, str) else NOT_TENSOR
            )
        if type(expr) is cst.Tuple:
            return Val(items=tuple(self.eval_element(element, state) for element in expr.elements))
        if type(expr) is cst.List:
            return Val(items=tuple(self.eval_element(element, state) for element in expr.elements), cell=fresh_id())
        if type(expr) is cst.Dict:
            return self.eval_dict(expr, state)
        if type(expr) is cst.IfExp:
            holds, fails = self.branch(expr.test, state)
            body = self.eval(expr.body, holds) if holds is not None else None
            orelse = self.eval(expr.orelse, fails) if fails is not None else None
            value = _merged_value(body, orelse, holds, fails, state)
            paths = [path for path in (holds, fails) if path is not None]
            if any(path is not state for path in paths):
                state.adopt(paths, [value])  # what a side recorded (`torch.sigmoid(x) if c else x`: its save) lives on
            return value
        if type(expr) is cst.NamedExpr:
            value = self.eval(expr.value, state)
            self.assign(expr.target, value, state, expr)
            return value
        if type(expr) is cst.Comparison:
            identity = all(isinstance(part.operator, (cst.Is, cst.IsNot)) for part in expr.comparisons)
            evaluate = self.unread if identity else self.eval
            operands = [evaluate(expr.left, state)] + [evaluate(part.comparator, state) for part in expr.comparisons]
            if not identity and any(map(is_tensor, operands)):  # `a is b` makes a bool
                return self.new_tensor([], grad=Grad.NO)
            if len(operands) == 2:
                symbol, compare = _COMPARISONS.get(type(expr.comparisons[0].operator), ("", None))
                verdict = _compare(compare, symbol, operands[0], operands[1]) if compare is not None else None
                if verdict is not None:
                    return Const(verdict)
                return self.assumed_truth(expr, operands[0], _subject_test(symbol, operands[1]))
            return NOT_TENSOR
        if type(expr) is cst.BooleanOperation:
            left, right = self.eval(expr.left, state), self.eval(expr.right, state)
            verdict = _truth(left)
            if verdict is not None:
                return right if verdict == isinstance(expr.operator, cst.And) else left
            return merge_values(left, right)
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            return self.eval_comprehension(expr, state)
        if type(expr) is cst.DictComp:
            self.eval_comprehension(expr, state)
            return DictVal(cell=fresh_id())
        if type(expr) is cst.FormattedString:
            return self.eval_fstring(expr, state)
        if type(expr) is cst.Lambda:
            return self.function_value(self.ctx.lambda_def(expr), state)
        if type(expr) is cst.Yield:
            return self.on_yield(expr, state)
        if isinstance(expr, (cst.Set, cst.Await)):
            for child in expr.children:
                if isinstance(child, cst.BaseExpression):
                    self.eval(child, state)
        return NOT_TENSOR

    def eval_fstring(self, expr: cst.FormattedString, state: State) -> Value:
        """`f"act{i + 1}"` with every part known is that string (a child's name in a loop of
        known rounds); otherwise a string not known. Every part is read either way."""
        text: list[str] | None = []
        for part in expr.parts:
            if isinstance(part, cst.FormattedStringText):
                text = text + [part.value] if text is not None else None
                continue
            part = cast(cst.FormattedStringExpression, part)  # the other kind of part
            value = collapse(self.eval(part.expression, state))
            known = (
                isinstance(value, Const)
                and type(value.value) in (str, int, bool)
                and part.conversion is None
                and part.format_spec is None
            )
            text = text + [str(value.value)] if text is not None and known and isinstance(value, Const) else None
        return (
            Const("".join(text), origin=expr, origin_path=self.ctx.path)
            if text is not None and "{" not in "".join(text)
            else NOT_TENSOR
        )

    def eval_element(self, element: cst.BaseElement, state: State) -> Value:
        value = self.eval(element.value, state)
        return element_of(value) if isinstance(element, cst.StarredElement) else value

    def eval_dict(self, expr: cst.Dict, state: State) -> DictVal:
        result = DictVal(cell=fresh_id())
        for element in expr.elements:
            if isinstance(element, cst.StarredDictElement):
                spread = collapse(self.eval(element.value, state))
                if isinstance(spread, DictVal):
                    for key, value in spread.entries:
                        result = result.set(key, value)
                continue
            element = cast(cst.DictElement, element)  # the other kind of element
            key = self.eval(element.key, state)
            value = self.eval(element.value, state)
            if isinstance(key, Const):
                result = result.set(key.value, value)
            else:
                result = replace(result, rest=merge_values(result.rest, value))
        return result

    def eval_name(self, expr: cst.Name, state: State) -> Value:
        name = expr.value
        if OUTER + name in state.env and (name not in state.env or name in self.ctx.declared_global):
            # A module-level list or dict a callee filled (`activation[name] = output` in a
            # forward hook, during `model(x)`): this function reads what it holds now, also
            # where it bound it (`global activations; activations = {}`).
            name = OUTER + name
        self.read(name, expr, state)
        if name in state.env:
            return state.env[name]
        return self.global_value(expr.value, expr)

    def global_value(self, name: str, node: cst.CSTNode) -> Value:
        """A name the function does not bind: True/False/None, an import (torch, a project
        module), a class or function of the file, a module-level value, a builtin."""
        if name in ("True", "False"):
            return Const(name == "True", origin=node, origin_path=self.ctx.path)
        if name == "None":
            return Const(None)
        return self.engine.global_value(self.ctx, name)

    def read(self, name: str, node: cst.CSTNode, state: State, shown: str | None = None) -> None:
        """Reading a name whose tensor a hidden write changed under it: silent corruption.
        `shown`: the name as the code reads it, where `name` is an `object_slot`."""
        first = state.stale.pop(name, None)
        for pending in (first, *first.later) if first is not None else ():
            if not consistent(pending.condition | state.condition):
                continue  # only after a write on a path this one excludes (eval vs training)
            if pending.twice and not _held_twice(state.env.get(name), pending.held):
                _stale(state, name, replace(pending, later=()))  # still one entry: the write meant to update it
                continue
            shown = shown or name.removeprefix(OUTER)
            reason = partial(_stale_read, self.ctx, shown, node, pending)
            hazard = Hazard(True, reason, silent=True)
            self.emit(
                pending.form,
                pending.site,
                f"{pending.action} `{pending.written}` in place",
                hazard,
                condition=pending.condition | state.condition,
                calls=pending.related,
                flag=pending.flag,
            )

    def eval_attribute(self, expr: cst.Attribute, state: State, read: bool = True) -> Value:
        name = dotted(expr)
        attr = expr.attr.value
        if name is not None and name in state.env:
            if read:
                self.read(name, expr, state)
            return state.env[name]
        if attr in METADATA_ATTRIBUTES and is_tensor(self.peek(expr.value, state)):
            return NOT_TENSOR  # `.shape`, `.dtype`: not a read of the values
        if attr == "training":
            return Sym(TRAINING, Const(True))
        qualname = self.ctx.imports.qualname(expr)
        if qualname is not None and qualname.split(".")[0] in (
            "torch",
            "functools",
            "itertools",
            "collections",
            "types",
            "argparse",
        ):
            return self.engine.torch_value(qualname)
        base = self.eval(expr.value, state) if read else self.peek(expr.value, state)
        changed = slot_of_object(state.env, base, attr) if is_project_object(base) and not is_self(expr.value) else None
        if changed is not None:  # `self._extractor.outputs`, which the extractor's hook filled
            if read:
                self.read(changed, expr, state, self.ctx.code_of(expr))
            return state.env[changed]
        value = self.calls.attribute_of(base, attr, expr, state)
        if name is not None and name.startswith("self.") and name.count(".") == 1 and not isinstance(value, Val):
            state.env[name] = value
        elif name is not None and is_self(expr.value) and isinstance(value, Val) and value.is_tensor:
            state.env[name] = value  # a parameter keeps its identity for the rest of the run
        return value

    def eval_subscript(self, expr: cst.Subscript, state: State) -> Value:
        name = expr.value.value if isinstance(expr.value, cst.Name) else None
        held = state.stale[name].held if name in state.stale else frozenset()
        # An item of a list or dict that kept a tensor rewritten since is a stale read only if
        # it is that tensor (`outputs[2]` after `outputs[1]` was rewritten is not).
        base = self.peek(expr.value, state) if held else self.eval(expr.value, state)
        self.note_blind(expr.value, base)
        advanced, key = self.eval_slices(expr, state)
        results = []
        for condition, option in options_of(base):
            results.append((condition, self.subscript_of(option, expr, key, advanced, state)))
        if len(results) == 1:
            result = results[0][1]
        elif len({is_tensor(value) for _, value in results}) == 2:
            result = Choice(tuple(results))  # `state[2]` of an optional `state`: a tensor only when set
        else:
            result = merge_all(value for _, value in results)
        if held and name is not None and any(tensor.storages & held for tensor in tensors_in(result)):
            self.read(name, expr.value, state)
        return result

    def subscript_of(self, base: Value, expr: cst.Subscript, key: Value | None, advanced: bool, state: State) -> Value:
        if isinstance(base, Module):
            if isinstance(key, Const) and isinstance(key.value, str) and base.keys is not None:
                return next(
                    (item for k, item in zip(base.keys, base.items or (), strict=False) if k == key.value),
                    element_of(base),
                )
            if isinstance(key, Const) and isinstance(key.value, int):
                return item_of(base, key.value)
            if base.items is not None and isinstance(expr.slice[0].slice, cst.Slice):
                # `self.layers[:-1]`: the same kind of container, holding the items the slice keeps
                kept = self.known_slice(expr.slice[0].slice, state)
                if kept is None:
                    return replace(base, ident=fresh_id())
                return replace(
                    base,
                    ident=fresh_id(),
                    items=base.items[kept],
                    keys=base.keys[kept] if base.keys is not None else None,
                )
            return element_of(base)
        if isinstance(base, DictVal):
            found = base.get(key.value) if isinstance(key, Const) else None
            return found if found is not None else (base.rest if base.rest is not None else merge_all(base.values()))
        if isinstance(base, Val) and base.items is not None and len(expr.slice) == 1:
            if isinstance(key, Const) and isinstance(key.value, int):
                return item_of(base, key.value)
            if isinstance(key, Const) and isinstance(key.value, str):
                return NOT_TENSOR  # a tuple indexed by a name raises: the value is not this option
            if isinstance(expr.slice[0].slice, cst.Slice):
                kept = self.known_slice(expr.slice[0].slice, state)  # `rep[1:]`: the items it keeps
                return replace(base, cell=None, items=base.items[kept] if kept is not None else base.items)
            return element_of(base)
        base = collapse(base)  # an option may itself be a choice (an optional tensor)
        if not isinstance(base, Val) or not base.is_tensor or string_index(expr):
            return NOT_TENSOR  # `args["stride"]`: a dict, whatever we thought it was
        if base.opaque and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
            return base.part()  # `outputs[1]` of a module we cannot see: likely a tuple element
        # Basic indexing returns a view; indexing with a tensor or a list copies.
        return self.new_tensor([base]) if advanced else base.view()

    def known_slice(self, part: cst.Slice, state: State) -> slice | None:
        """A slice whose bounds are known numbers (or left out); None when one is not known."""
        bounds: list[int | None] = []
        for bound in (part.lower, part.upper, part.step):
            value = collapse(self.peek(bound, state)) if bound is not None else Const(None)
            if (
                not isinstance(value, Const)
                or not (value.value is None or type(value.value) is int)
                or value.value == 0
                and bound is part.step
            ):
                return None
            bounds.append(value.value)
        return slice(*bounds)

    def note_blind(self, expr: cst.BaseExpression, value: Value, writes: bool = False) -> None:
        if isinstance(value, Sym) and isinstance(expr, cst.Name) and expr.value in self.param_names:
            self.blind = True
            self.blind_writes |= writes

    def eval_slices(self, expr: cst.Subscript, state: State) -> tuple[bool, Value | None]:
        """Whether the subscript indexes with tensors (advanced indexing), and its one index's
        value (`table[name.lower()]`), None for a slice or several indices."""
        advanced = False
        key: Value | None = None
        for element in expr.slice:
            index = element.slice
            if isinstance(index, cst.Index):
                value = collapse(self.eval(index.value, state))
                key = value if len(expr.slice) == 1 else None
                if (
                    is_tensor(value)
                    or isinstance(index.value, (cst.List, cst.ListComp))
                    or (isinstance(value, Val) and value.items is not None and any(map(is_tensor, value.items)))
                ):
                    advanced = True
            else:
                index = cast(cst.Slice, index)  # the other kind of slice
                for part in (index.lower, index.upper, index.step):
                    if part is not None:
                        self.eval(part, state)
        return advanced, key

    def eval_binary(self, expr: cst.BinaryOperation, state: State) -> Value:
        left = self.eval(expr.left, state)
        right = self.eval(expr.right, state)
        if not (is_tensor(left) or is_tensor(right)):
            if isinstance(expr.operator, cst.Add) and all(
                isinstance(side := collapse(v), Val) and side.items is not None for v in (left, right)
            ):
                return self.calls.extended(left, right)  # list + list
            repeated = _repeated(expr, collapse(left), collapse(right))
            if repeated is not None:
                return repeated
            return self.combine(left, right, expr.operator, expr)
        left, right = collapse(left), collapse(right)
        op, symbol = _BINARY_OPS.get(type(expr.operator), (None, ""))
        texts = {"self": self.ctx.code_of(expr.left), "other": self.ctx.code_of(expr.right)}
        if op in _COMMUTATIVE and not is_tensor(left):
            left, right = right, left
            texts = {"self": texts["other"], "other": texts["self"]}
        result = self.new_tensor([left, right])
        if op is not None:
            second = self.second_param(op)
            texts[second] = texts.pop("other")
            result = self.record_op(op, symbol, {"self": left, second: right}, result, expr, state, texts)
        return result

    def second_param(self, op: str) -> str:
        facts = self.facts.ops.get(op)
        return facts.params[1] if facts is not None and len(facts.params) > 1 else "other"

    def eval_iterable(self, iterable: cst.BaseExpression, state: State) -> Value:
        if (
            isinstance(iterable, cst.Call)
            and isinstance(iterable.func, cst.Name)
            and iterable.func.value in ("enumerate", "zip", "reversed")
        ):
            return Val(items=tuple(self.eval(arg.value, state) for arg in iterable.args if not keyword_of(arg)))
        return self.eval(iterable, state)

    def iteration_element(
        self, iterable: cst.BaseExpression, value: Value, state: State, unpassed: bool = False
    ) -> Value:
        """What one iteration binds: `enumerate(x)` gives (index, element), `zip(a, b)` a tuple.
        With `unpassed` (a `for` loop), an element of an argument nobody passed, directly or
        zipped, is as unknown as the argument: writing it (`for t, m, s in zip(tensor, mean,
        std): t.sub_(m)`, torchvision's old `normalize`) writes what the callers pass."""

        def element(part: Value, expr: cst.BaseExpression) -> Value:
            if unpassed and isinstance(part, Sym) and isinstance(expr, cst.Name) and expr.value in self.param_names:
                return part
            return element_of(part, expr)

        if (
            isinstance(iterable, cst.Call)
            and isinstance(iterable.func, cst.Name)
            and iterable.func.value in ("enumerate", "zip", "reversed")
        ):
            arguments = [arg.value for arg in iterable.args if not keyword_of(arg)]
            pick = element if iterable.func.value == "zip" else element_of
            parts = (
                [pick(part, loop) for part, loop in zip(value.items or (), arguments, strict=False)]
                if isinstance(value, Val)
                else []
            )
            if iterable.func.value == "enumerate":
                return Val(items=(NOT_TENSOR, parts[0] if parts else NOT_TENSOR))
            if iterable.func.value == "zip":
                return Val(items=tuple(parts))
            return parts[0] if parts else NOT_TENSOR
        return element(value, iterable)

    def eval_comprehension(
        self, expr: cst.ListComp | cst.GeneratorExp | cst.SetComp | cst.DictComp, state: State
    ) -> Value:
        """A homogeneous list: its element evaluated once, with the loop names bound (then
        restored); over a container whose items a loop would run through, the list it builds."""
        outer = dict(state.env)
        clause: cst.CompFor | None = expr.for_in
        iterable = self.eval_iterable(expr.for_in.iter, state)
        if not isinstance(expr, cst.DictComp) and expr.for_in.inner_for_in is None:
            items = self.unrolled(expr.for_in.iter, iterable, state)
            if items:
                return self.exact_comprehension(expr, items, outer, state)
        while clause is not None:
            self.assign(clause.target, self.iteration_element(clause.iter, iterable, state), state, expr)
            for condition in clause.ifs:
                self.eval(condition.test, state)
            clause = clause.inner_for_in
            if clause is not None:
                iterable = self.eval_iterable(clause.iter, state)
        if isinstance(expr, cst.DictComp):
            self.eval(expr.key, state)
            element = self.eval(expr.value, state)
        else:
            element = self.eval(expr.elt, state)
        state.env = outer
        return Val(items=(element,), cell=fresh_id())

    def exact_comprehension(
        self,
        expr: cst.ListComp | cst.GeneratorExp | cst.SetComp,
        items: list[Value],
        outer: dict[str, Value],
        state: State,
    ) -> Value:
        """`tuple(v for v in [hidden, pooled, attentions] if v is not None)`, transformers' way of
        returning what was computed, and `nn.ModuleList(nn.Linear(n, k) for n, k in zip(ins,
        outs))`: the element is evaluated per item, and a filter Python would decide keeps or
        drops it, so `outputs[1]` is `pooled`, not any of the three. A filter left open forks the
        result (up to _MAX_EXACT_OPTIONS lists); beyond that the list is homogeneous. `outer`: the
        names bound before, restored after."""
        options: list[tuple[Value, ...]] | None = [()]  # None: too many, the list is homogeneous
        evaluated: list[Value] = []
        for item in items:
            self.assign(expr.for_in.target, item, state, expr)
            verdicts = {_truth(self.eval(condition.test, state)) for condition in expr.for_in.ifs}
            if False in verdicts:
                continue
            element = self.eval(expr.elt, state)
            evaluated.append(element)
            if options is not None:
                kept = [(*option, element) for option in options]
                options = options + kept if None in verdicts else kept
                options = options if len(options) <= _MAX_EXACT_OPTIONS else None
        state.env = outer
        if options is None:
            return Val(items=(merge_all(evaluated),), cell=fresh_id())
        values = [Val(items=option, cell=fresh_id()) for option in options]
        return values[0] if len(values) == 1 else Choice(tuple((frozenset(), value) for value in values))

    # ----------------------------------------------------------------- saves and writes

    def record_op(
        self,
        op: str,
        label: str,
        bound: dict[str, Value],
        result: Val,
        node: cst.CSTNode,
        state: State,
        texts: dict[str, str],
        only: Callable[[str], bool] | None = None,
        facts: OpFacts | None = None,
    ) -> Val:
        """Record what `op` saves for backward, and return its result with those saves in its
        graph. In-place ops pass `only`: autograd saves a clone of an in-place op's original
        `self`, never `self` itself."""
        facts = facts or self.facts.ops.get(op)
        if facts is None or not self.grad_enabled:
            return result
        outputs = result.items if result.items is not None and len(facts.outputs) > 1 else None
        made: set[int] = set()
        for saved, triggers in facts.saves.items():
            if only is not None and not only(saved):
                continue
            grads = [grad_of(bound.get(trigger)) for trigger in triggers]
            if max(grads, default=Grad.NO) is Grad.NO:
                continue
            if saved in facts.outputs and outputs is not None:
                target: Value | None = outputs[facts.outputs.index(saved)]
            else:
                target = result if saved == "result" else bound.get(saved)
            for tensor in tensors_in(target):
                what = "its result" if saved == "result" or saved in facts.outputs else texts.get(saved, saved)
                record = self.save(state, tensor, label, what, node, certain=max(grads) > Grad.UNKNOWN)
                made.add(record.order)
        if not made:
            return result
        # The op's result depends on what it saved: a backward through it needs them.
        if result.items is not None:
            return replace(
                result,
                items=tuple(
                    replace(item, graph=item.graph | made) if is_tensor_val(item) and item.grad > Grad.NO else item
                    for item in result.items
                ),
            )
        return replace(result, graph=result.graph | made)

    def save(
        self,
        state: State,
        tensor: Val,
        op: str,
        what: str,
        node: cst.CSTNode,
        certain: bool = True,
        storages: frozenset[int] | None = None,
        condition: Condition = frozenset(),
    ) -> SaveRecord:
        """Record that autograd saved `tensor` (or `storages`) for backward, under the path's condition."""
        record = SaveRecord(
            op,
            what,
            node,
            certain,
            storages=tensor.storages if storages is None else storages,
            condition=condition | state.condition | self.extra,
        )
        for storage in record.storages:
            state.saves[storage] = state.saves.get(storage, frozenset()) | {record}
        return record

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
        intended_readers: AbstractSet[str | None] = frozenset(),
        condition: Condition = frozenset(),
        calls: tuple[Callable[[], Related], ...] = (),
        overlap: Reason | None = None,
        chain: cst.CSTNode | None = None,
        flag: cst.CSTNode | None = None,
        written: str | None = None,
    ) -> None:
        """An in-place write to `target`: report it if the analysis can say why it breaks.
        `written`: the target as code, where `target_expr` is not it (see `Args.input_text`)."""
        if not target.is_tensor:
            return
        written = written or self.ctx.code_of(target_expr)
        nested = site is not None and site.node is not node
        site = site or Site(self.ctx.path, node)
        condition = condition | state.condition | self.extra
        target = target.held_when(condition)
        if not target.is_tensor:
            return
        if self.recorder is not None:
            from .summaries import ParamWrite

            self.recorder.on_write(
                target.storages,
                ParamWrite(
                    (),
                    site,
                    form,
                    action,
                    form is Form.INPLACE_ACTIVATION,
                    self.grad_enabled,
                    condition,
                    calls,
                    nested,
                    bool(target.storages & self.copied),
                    target.hidden,
                ),
            )
        if self.contract is not None:
            # A callee's write (`bump(x)` in another file) breaches the contract at the call.
            here = site if site.path == self.ctx.path else Site(self.ctx.path, node)
            self.contract.on_write(target.storages, here, action, written, state)
            return
        if target.hidden is not None:
            form = Form.HIDDEN
        hazard = self.hazard_of(target, state, node, written)
        if hazard is None and self.grad_enabled and target.grad > Grad.NO:
            self.hookable = True
        if hazard is None and overlap is not None:
            hazard = Hazard(True, lambda: overlap, silent=True)
        if hazard is None and target.storages & self.kept and not target.fresh_buffer:
            assert self.cls is not None and self.running is not None
            owner, accessor, defined, at, locate = (
                self.cls.name,
                self.running,  # located by its whole definition: its name equals every other `__getitem__`'s
                self.ctx.path,
                site.path,
                self.engine.locate,
            )
            hazard = Hazard(
                True, lambda: kept_reason(owner, accessor.name.value, at, locate(accessor, defined)), silent=True
            )
        if (
            hazard is None and target.expanded is not None and self.grad_enabled
        ):  # as stale reads (the pre-pass relies on it)
            expand, path = target.expanded, self.ctx.path
            method = _called_name(expand)
            hazard = Hazard(
                True, lambda: expanded_reason(written, method, path, self.engine.locate(expand, path)), silent=True
            )
        if hazard is not None:
            condition |= hazard.condition
            name = target_expr.value if isinstance(target_expr, cst.Name) else None
            exclusive = name is not None and self.is_exclusive(name, target, state)
            through_view = name in self.view_names and self.shares_storage(name, target, state)
            # The saves it blames are this run's own: they matter only if their graph leaves the
            # run (a caller applies the write to what it saved itself). A refused write raises now.
            blamed = () if hazard.refused else state.saves_of(target)
            self.emit(
                form,
                site,
                f"{action} `{written}` in place",
                hazard,
                target_expr,
                exclusive,
                through_view,
                condition,
                calls,
                flag,
                chain,
                records=blamed,
            )
            if hazard.refused:
                state.dead = True  # torch raised at the write: nothing after it runs on this path
        elif hidden_from_reader:  # a value read stale is wrong whether or not autograd records
            pending = PendingWrite(form, site, action, written, condition, calls, flag)
            if target.fresh_buffer and target.grad is Grad.NO:
                return  # an out-parameter: a buffer made to be filled, read afterwards on purpose
            spread = spread_names(node)
            for name, value in state.env.items():
                if name in intended_readers:
                    continue
                if isinstance(value, Val) and value.storages & target.storages and not other_round(value, target):
                    _stale(state, name, pending)
                elif (self.grad_enabled or name in spread or name.startswith(OUTER)) and _holds(value, target):
                    # `skips.append(x)` before `x = self.act(x)`: the list kept the tensor, not its
                    # values. Not where nothing records: inference code keeps windows onto a buffer
                    # it updates (SAM3's per-object mask views), and a loop's element stands for
                    # each element, which it may hand to different lists (timm's EMA by dtype);
                    # but a dict spread into the writing call is its arguments (`model(**inputs)`),
                    # and a list or dict of another scope was filled to be read there (a forward
                    # hook's `activation[name] = output.detach()` under `torch.no_grad()`).
                    _stale(state, name, replace(pending, held=target.storages))
        elif (
            isinstance(target_expr, cst.Name)
            and not target.fresh_buffer
            and not target.opaque  # what an unseen call returned may be a number (`new_idx += 1`)
            and target_expr.value not in self.loop_names
        ):
            # `total = loss` then `total += reg`: one tensor under two names, and a later read of
            # the other name sees the sum. (Through a view, `v = out[1:]`, is how a part of a
            # tensor is meant to change: a view is another object, and is left alone. So is a
            # write into part of the other name's tensor, `bounds[..., -1] += eps` after
            # `bounds = heights if reverse else widths`: its later reads may never index that
            # part; the tensor under two entries of one dict says more, below.)
            held = state.env.get(target_expr.value)
            whole = form is not Form.INDEX_ASSIGN
            advice = f"make `{written}` a new tensor (`{written} = {written} + ...`), or `.clone()` it first"
            pending = PendingWrite(form, site, action, written, condition, calls, flag, advice=advice)
            for name, value in state.env.items():
                if name == target_expr.value:
                    continue
                if value is held and whole:
                    _stale(state, name, pending)
                elif is_container(value) and any(item is held for item in _entries(value)):
                    _stale(state, name, replace(pending, held=target.storages, twice=True))
                elif _detached_from(value, target):
                    # `last = x[:, -1:].detach()` kept to add back after `x[...] -= last`:
                    # `.detach()` shares memory, so the write changed what it holds too.
                    advice = f"`.clone()` `{name}` where it is taken: `.detach()` shares memory with `{written}`"
                    _stale(state, name, replace(pending, advice=advice))

    def hazard_of(self, target: Val, state: State, node: cst.CSTNode, written: str) -> Hazard | None:
        """Why writing `target` (at `node`, in this run's file) breaks, if it does."""
        # no_grad stops recording, not version counting: a write there to a tensor saved
        # earlier still raises at backward; only leaves may be written freely.
        path, span_of = self.ctx.path, self.ctx.span_of
        refusal = _refusal(target)
        if (
            refusal
            and all(self.inherited.get(storage) == refusal for storage in target.storages)
            and self.recorder is not None
        ):
            return None
        locate, origin = self.engine.locate, target.origin
        if target.inference and not self.inference:
            made = target.inference
            return Hazard(True, lambda: inference_reason(path, made), refused=True)
        if target.grad is Grad.LEAF and self.grad_enabled:
            handed_out = _handing_out(origin)
            return Hazard(True, lambda: leaf_reason(path, locate(origin, path), handed_out), refused=True)
        if target.hooked is not None and target.grad > Grad.NO and self.grad_enabled:
            label = target.hooked
            return Hazard(True, lambda: hooked_reason(label, path, locate(origin, path)), refused=True)
        if target.multi_view is not None and target.grad > Grad.NO and self.grad_enabled:
            method = target.multi_view
            certain = target.grad > Grad.UNKNOWN
            return Hazard(certain, lambda: multi_view_reason(path, method, locate(origin, path)), refused=certain)
        # under the option a `Choice` call runs too (`self.act2` is ReLU only where `norm_head` is not)
        records = [r for r in state.saves_of(target) if consistent(r.condition | state.condition | self.extra)]
        if not records:
            return None
        certain_records = [record for record in records if record.certain]
        shown = sorted(
            certain_records or records,
            key=lambda record: (against_defaults(record.condition), len(record.condition), record.order),
        )
        when = shown[0].condition
        if target.hidden is not None:
            how = target.hidden
            return Hazard(bool(certain_records), lambda: hidden_reason(path, how, shown, span_of), when)
        cloned = target.cloned
        return Hazard(bool(certain_records), lambda: saved_reason(path, written, shown, node, span_of, cloned), when)

    def is_exclusive(self, name: str, target: Val, state: State) -> bool:
        """A local that is not an argument and shares its storage with no other live name."""
        return not target.storages & self.caller_storages and not self.shares_storage(name, target, state)

    def shares_storage(self, name: str, target: Val, state: State) -> bool:
        return any(
            other != name and isinstance(value, Val) and value.storages & target.storages
            for other, value in state.env.items()
        )

    def is_view_expression(self, expr: cst.BaseExpression) -> bool:
        """`out[1:]`, `out.T`, `out.view(...)`: what is written through it lands in `out`."""
        if isinstance(expr, cst.Subscript):
            return not string_index(expr)
        if isinstance(expr, cst.Attribute):
            return expr.attr.value in self.facts.view_attributes
        return (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in self.facts.view_methods
        )

    def emit(
        self,
        form: Form,
        site: Site,
        action: str,
        hazard: Hazard,
        target: cst.CSTNode | None = None,
        exclusive: bool = False,
        through_view: bool = False,
        condition: Condition = frozenset(),
        calls: tuple[Callable[[], Related], ...] = (),
        flag: cst.CSTNode | None = None,
        chain: cst.CSTNode | None = None,
        records: Sequence[SaveRecord] = (),
    ) -> None:
        if chain is not None:
            # `y.mul_(2).add_(1)`: one finding for the chain, at its first write, fixed as a whole.
            for index, (known, orders) in enumerate(self.sink):
                if known.node is chain and known.form is form:
                    self.sink[index] = (replace(known, chain=site.node), orders)
                    return
        if not (hazard.silent or hazard.refused) and records_nothing(condition):
            return  # the saves it blames are never made where the path's own test says nothing records
        if site.path != self.ctx.path:
            action = f"{action} (called from {Path(self.ctx.path).name})"
        span_of = self.engine.span_of(site.path)
        mutation = Mutation(
            form=form,
            node=site.node,
            action=action,
            locate=partial(span_of, site.node),
            explain=hazard.reason,
            certain=hazard.certain,
            target=target if site.path == self.ctx.path else None,
            exclusive=exclusive and site.path == self.ctx.path,
            through_view=through_view,
            silent=hazard.silent,
            path=site.path,
            condition=condition,
            calls=calls,
            flag=flag,
        )
        self.sink.append((mutation, frozenset(record.order for record in records)))

    # ----------------------------------------------------------------- helpers

    def new_tensor(self, inputs: Sequence[Value], grad: Grad | None = None) -> Val:
        tensors = [tensor for value in inputs for tensor in tensors_in(value)]
        if grad is None:
            grad = (
                min(max((tensor.grad for tensor in tensors), default=Grad.NO), Grad.MAYBE)
                if self.grad_enabled
                else Grad.NO
            )
        graph = frozenset().union(*(tensor.graph for tensor in tensors)) if grad is not Grad.NO else frozenset()
        return Val(fresh_storage(), grad, dtype=self.autocast, graph=graph, inference=self.inference)

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

    def is_inference_mode(self, expr: cst.BaseExpression) -> bool:
        target = expr.func if isinstance(expr, cst.Call) else expr
        return self.ctx.imports.qualname(target) in INFERENCE_MODE

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
        on_cpu = (
            isinstance(device, cst.SimpleString)
            and "cpu" in device.value
            or "cpu" in (self.ctx.imports.qualname(expr.func) or "")
        )
        return "bfloat16" if on_cpu else "float16"


def _constant_of(test: str) -> tuple[object] | None:
    """The constant an `== c` / `is None` assumption pins its subject to, as a 1-tuple."""
    import ast

    text = test.split(" ", 1)[1] if " " in test else ""
    try:
        return (ast.literal_eval(text),)
    except (ValueError, SyntaxError):
        return None


def _same_object(before: Value, after: Value | None) -> bool:
    """Whether a parameter still holds (part of) what its caller passed: a tensor written in
    place, a list or dict the caller also holds."""
    if after is None:
        return False
    if reachable(before) & reachable(after):
        return True
    cell = getattr(collapse(before), "cell", None)
    return cell is not None and cell == getattr(collapse(after), "cell", None)


def _refusal(tensor: Val) -> tuple[str, ...]:
    """What makes torch refuse writing a tensor at once, whoever wrote it."""
    return tuple(
        flag
        for flag in (
            tensor.grad is Grad.LEAF and "leaf",
            tensor.multi_view,
            tensor.hooked,
            tensor.inference and "inference",
        )
        if flag
    )


def _keep_grown(before: State, last: State, merged: State) -> None:
    """A list or container a loop appends to holds what its rounds appended, in order: the
    loop stands for `n` rounds, not for "maybe none, in any order". Merging the rounds' states
    would make one element stand for all of them, so that `nn.Sequential(*layers)` of
    `[act, conv, norm] * depth` could end with any of the three."""
    for name, grown in last.env.items():
        start = before.env.get(name)
        if (
            not isinstance(grown, (Val, Module))
            or not isinstance(start, type(grown))
            or grown.items is None
            or start.items is None
        ):
            continue
        if (
            len(grown.items) > len(start.items)
            and grown.items[: len(start.items)] == start.items
            and getattr(grown, "cell", None) == getattr(start, "cell", None)
        ):
            merged.env[name] = grown


def _merged(a: State | None, b: State | None) -> State | None:
    if a is None or b is None:
        return a if b is None else b
    return merge_states([a, b])


def _merged_value(
    body: Value | None, orelse: Value | None, holds: State | None, fails: State | None, state: State
) -> Value:
    if body is None or orelse is None:
        return body if orelse is None and body is not None else (orelse if orelse is not None else NOT_TENSOR)
    when_body = (
        frozenset(holds.assumed.values()) - frozenset(state.assumed.values()) if holds is not None else frozenset()
    )
    when_orelse = (
        frozenset(fails.assumed.values()) - frozenset(state.assumed.values()) if fails is not None else frozenset()
    )
    return merge_values(body, orelse, when_body, when_orelse)


def _emptiness_subject(test: cst.Comparison) -> str | None:
    """The name `test` finds empty: `x.numel() == 0`, `x.shape[-2] == 0`, `x.size(0) == 0`,
    `len(x) == 0`."""
    comparator = test.comparisons[0].comparator
    if not (
        type(test.comparisons[0].operator) is cst.Equal and type(comparator) is cst.Integer and comparator.value == "0"
    ):
        return None
    size = test.left
    if type(size) is cst.Subscript:
        size = size.value  # `x.shape[-2]`
    if type(size) is cst.Call:
        if type(size.func) is cst.Name and size.func.value == "len" and len(size.args) == 1:
            subject = size.args[0].value
            return subject.value if type(subject) is cst.Name else None
        size = size.func  # `x.size(0)`, `x.numel()`
    if type(size) is cst.Attribute and size.attr.value in ("shape", "size", "numel") and type(size.value) is cst.Name:
        return size.value.value
    return None


def _grad_test(test: cst.BaseExpression) -> tuple[cst.BaseExpression, str, bool] | None:
    """`x.requires_grad`, `x.grad_fn is not None` (true when `x` records), `x.grad_fn is None`
    (true when it does not): `(x, attribute, negated)`."""
    if isinstance(test, cst.Attribute) and test.attr.value == "requires_grad":
        return test.value, "requires_grad", False
    if (
        isinstance(test, cst.Comparison)
        and len(test.comparisons) == 1
        and isinstance(test.left, cst.Attribute)
        and test.left.attr.value == "grad_fn"
    ):
        comparison = test.comparisons[0]
        if (
            isinstance(comparison.comparator, cst.Name)
            and comparison.comparator.value == "None"
            and isinstance(comparison.operator, (cst.Is, cst.IsNot))
        ):
            return test.left.value, "grad_fn", isinstance(comparison.operator, cst.Is)
    return None


def _repeated(expr: cst.BinaryOperation, left: Value, right: Value) -> Val | None:
    """`[hidden_dim] * (num_layers - 1)`: a display repeated a known number of times, the list
    of widths an MLP's layers are built from."""
    if (
        isinstance(expr.operator, cst.Multiply)
        and isinstance(expr.left, (cst.List, cst.Tuple))
        and not any(isinstance(element, cst.StarredElement) for element in expr.left.elements)
        and isinstance(left, Val)
        and left.items is not None
        and isinstance(right, Const)
        and type(right.value) is int
        and 0 <= right.value * len(left.items) <= _MAX_UNROLLED
    ):
        return Val(items=left.items * right.value, cell=fresh_id() if isinstance(expr.left, cst.List) else None)
    return None


def _items(value: Value) -> tuple[Value, ...] | None:
    """A container's items (a list, tuple or torch container), None for anything else."""
    return value.items if isinstance(value, (Val, Module)) and not is_tensor(value) else None


def _truth(value: Value) -> bool | None:
    """Python truthiness where it is known: constants, objects (always true), displays."""
    if isinstance(value, Const):
        try:
            return bool(value.value)
        except Exception:
            return None
    if isinstance(value, (Module, Klass, Func, Partial)):
        return True
    if isinstance(value, DictVal) and value.entries:
        return True  # an empty one may be a dict whose keys are not known (`dict(config)`)
    if isinstance(value, Val):
        if value.is_tensor:
            return None
        if value.items is not None and value.cell is None:
            return bool(value.items)  # a tuple display
        return None
    return None


def _compare(compare: Callable[[Any, Any], bool], symbol: str, left: Value, right: Value) -> bool | None:
    left, right = collapse(left), collapse(right)
    if symbol in ("is", "is not") and isinstance(right, Const) and right.value is None:
        if isinstance(left, Const):
            return compare(left.value, None)
        if (
            isinstance(left, (Module, Klass, Func, Partial, DictVal))
            or is_tensor(left)
            or (isinstance(left, Val) and left.items is not None and left.cell is not None)
        ):
            return symbol == "is not"
        return None
    if symbol in ("is", "is not") and left is right and is_tensor_val(left) and left.round is None:
        return symbol == "is"  # `working = x` then `working is x`: the name was bound to that very tensor
    if isinstance(left, Const) and isinstance(right, Const):
        try:
            return bool(compare(left.value, right.value))
        except Exception:
            return None
    if symbol in ("is", "is not", "==", "!=") and (same := same_object(left, right)) is not None:
        return same == (symbol in ("is", "=="))
    if isinstance(left, Klass) and isinstance(right, Val) and right.items is not None and symbol in ("in", "not in"):
        return None if may_contain(right.items, left) else symbol == "not in"
    if isinstance(left, Const) and isinstance(right, Val) and right.items is not None and symbol in ("in", "not in"):
        values = [item.value for item in right.items if isinstance(item, Const)]
        if len(values) == len(right.items):
            return compare(left.value, tuple(values))
    return None


def _called_name(node: cst.CSTNode) -> str:
    """`expand_as` of `x.expand_as(y)`, `broadcast_to` of `torch.broadcast_to(x, shape)`."""
    func = node.func if type(node) is cst.Call else node
    if type(func) is cst.Attribute:
        return func.attr.value
    return func.value if type(func) is cst.Name else "expand"


def _handing_out(origin: cst.CSTNode | None) -> str | None:
    """The method a leaf came from when it was handed out, not made: `model.parameters()`."""
    if type(origin) is cst.Call and type(origin.func) is cst.Attribute:
        method = origin.func.attr.value
        return method if method in ("parameters", "named_parameters") else None
    return None


def _subject_test(symbol: str, right: Value) -> tuple[str, bool] | None:
    """The assumption text of `<subject> <symbol> <right>`: `("> 0", True)`, `("is None", False)`."""
    right = collapse(right)
    if isinstance(right, Const):
        shown = repr(right.value)
    elif isinstance(right, Val) and right.items is not None and all(isinstance(item, Const) for item in right.items):
        shown = repr(tuple(item.value for item in right.items if isinstance(item, Const)))  # each is, as tested
    else:
        return None
    positive = _POSITIVE.get(symbol, symbol)
    return (f"{positive} {shown}", symbol not in _POSITIVE)


def _holds(value: Value, target: Val) -> bool:
    """Whether a list, tuple or dict holds `target` (the same tensor, not one of another round)."""
    if not is_container(value):
        return False
    return any(tensor.storages & target.storages and not other_round(tensor, target) for tensor in tensors_in(value))


def _entries(container: Value | None) -> list[Value]:
    """The values a dict, list or tuple holds directly."""
    if isinstance(container, DictVal):
        return container.values()
    return list(container.items or ()) if isinstance(container, Val) else []


def _held_twice(container: Value | None, storages: frozenset[int]) -> bool:
    """Whether two entries of a dict or list hold the tensor (`batch["input_ids"]` and
    `batch["labels"]`)."""
    return sum(any(t.storages & storages for t in tensors_in(entry)) for entry in _entries(container)) >= 2


def _detached_from(value: Value, target: Val) -> bool:
    """A `.detach()` of the written tensor or of a part of it, kept under another name."""
    return isinstance(value, Val) and value.hidden == "detach" and bool(value.storages & target.storages)


def _stale(state: State, name: str, pending: PendingWrite) -> None:
    """`name`'s tensor was rewritten under it by `pending` (after the writes already noted)."""
    known = state.stale.get(name)
    state.stale[name] = pending if known is None else known.then(pending)


def _stale_read(ctx: FileContext, name: str, node: cst.CSTNode, pending: PendingWrite) -> Reason:
    """The reason of a stale read, worded (and its line located) only if a rule reports it."""
    return stale_reason(ctx.path, name, ctx.span_of(node), bool(pending.held), pending.advice, pending.kept)
