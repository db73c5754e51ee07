"""The interfaces the parts of the interpreter see of each other.

`CallEvaluator` and `ModuleFactory` are composed into `FunctionInterpreter` and reach back into
it through `Interpreter`; the interpreter reaches the memoised runs, instances and module-level
names of the whole analysis through `Engine`. Declared here so that no module of the analysis
imports one that imports it back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

import libcst as cst

if TYPE_CHECKING:
    from ..diagnostics import Related, Span
    from .arguments import Args, Binding
    from .autograd_function import FunctionContract
    from .calls import CallEvaluator
    from .classes import ClassInfo, FunctionRef
    from .conditions import Condition
    from .hazards import Hazard
    from .model import Form, Mutation, Reason
    from .project import FileContext, Project
    from .state import SaveRecord, Site, State
    from .summaries import Summary, SummaryRecorder
    from .torch_facts import OpFacts, TorchFacts
    from .values import Grad, Module, Val, Value


class Engine(Protocol):
    project: Project
    assigned_objects: dict[object, tuple[Module, object]]

    def grad_enabled(self, ctx: FileContext, node: cst.FunctionDef, cls: ClassInfo | None) -> bool: ...
    def global_value(self, ctx: FileContext, name: str) -> Value: ...
    def torch_value(self, qualname: str) -> Value: ...
    def namespace_member(self, namespace: Value, attr: str) -> Value: ...
    def class_member(self, info: ClassInfo, attr: str, bound: Module | None) -> Value: ...
    def method_of(self, info: ClassInfo, name: str) -> FunctionRef | None: ...
    def mro(self, info: ClassInfo) -> list[ClassInfo]: ...
    def torch_base(self, info: ClassInfo) -> str | None: ...
    def subclass_of(self, info: ClassInfo, base: ClassInfo) -> bool: ...
    def super_of(self, interp: Interpreter) -> Value: ...
    def locate(self, node: cst.CSTNode | None, prefer: str) -> tuple[str, Span] | None: ...
    def span_of(self, path: str) -> Callable[[cst.CSTNode], Span]: ...
    def run(
        self,
        interp: Interpreter,
        ref: FunctionRef,
        args: Args,
        bound: Value | None,
        state: State,
        call_site: bool = True,
        closure: tuple[tuple[str, Value], ...] = (),
    ) -> tuple[Summary, Binding] | None: ...
    def instantiate(
        self, interp: Interpreter, info: ClassInfo, call: cst.Call | None, args: Args, state: State
    ) -> Value: ...


class Interpreter(Protocol):
    engine: Engine
    project: Project
    ctx: FileContext
    facts: TorchFacts
    calls: CallEvaluator
    grad_enabled: bool
    autocast: str | None
    inference: tuple[str, Span] | None  # where the inference_mode it runs under was entered
    constructing: bool
    depth: int
    extra: Condition
    patches: dict[int, Module]
    param_storages: frozenset[int]
    copied: frozenset[int]  # storages this run took a `.clone()` of
    children: list[Summary]
    contract: FunctionContract | None
    ctx_name: str | None
    discarded: cst.BaseExpression | None
    cls: ClassInfo | None
    running: cst.FunctionDef | None  # the function this run executes (None for module-level code)
    recorder: SummaryRecorder | None  # None for module-level code (and constructions on defaults)

    def eval(self, expr: cst.BaseExpression, state: State) -> Value: ...
    def peek(self, expr: cst.BaseExpression, state: State) -> Value: ...
    def unread(self, expr: cst.BaseExpression, state: State) -> Value: ...
    def note_blind(self, expr: cst.BaseExpression, value: Value, writes: bool = False) -> None: ...
    def new_tensor(self, inputs: Sequence[Value], grad: Grad | None = None) -> Val: ...
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
    ) -> Val: ...
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
    ) -> SaveRecord: ...
    def regraph(self, target: Val, graph: frozenset[int], state: State, gained: Grad) -> None: ...
    def defer(self, mutations: Sequence[Mutation], result: Value) -> Value: ...
    def modes(self) -> AbstractContextManager[None]: ...
    def rebind_container(self, expr: cst.BaseExpression, old: Value, new: Value, state: State) -> None: ...

    def rebind_named(self, name: str | None, old: Value, new: Value, state: State) -> None: ...
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
    ) -> None: ...
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
    ) -> None: ...
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
    ) -> None: ...
