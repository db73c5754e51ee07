"""What running a function in one context did, seen from its call site (a `Summary`).

A function is run with what a call site passes (tensors by what autograd knows of them, Python
values as they are), and the run is kept per context: which tensor arguments it writes in place
(and where), which it leaves saved for backward, what it returns, which attributes of `self` it
binds (construction), which lists and dicts it was given it filled, and which saves it made on
storages that outlive it (a module's parameters, for optimizer steps). The findings the run
itself proves (a save and a write both inside it) are kept with it, with the runs it reached,
so that a file's analysis reports exactly what its own entry points reach.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING

from .conditions import Condition
from .shared import shared
from .state import NO_HOOKS, ModuleHooks, PendingWrite, SaveRecord, Site, State, TrainingEvent
from .values import DictVal, Module, Val, Value, options_of

if TYPE_CHECKING:
    import libcst as cst

    from ..diagnostics import Related
    from .classes import ClassInfo
    from .model import Form, Mutation

Slot = tuple[object, ...]  # (argument index, item index or dict key, ...): a tensor reached through an argument


@dataclass(frozen=True, slots=True)
class ParamWrite:
    slot: Slot
    site: Site
    form: Form  # of the write inside the callee
    action: str
    via_activation: bool  # done by an inplace=True activation: the caller's call is TIP004
    grad_enabled: bool  # the callee's own grad mode there: under its no_grad a leaf may be written
    condition: Condition = frozenset()
    related: tuple[Callable[[], Related], ...] = ()
    # Done by a callee of the function that recorded it, which handed its argument on: a
    # pipeline of helpers updating a buffer (SAM3's masks "updated in-place then returned").
    nested: bool = False
    # The function kept a `.clone()` of the tensor before writing it (Mixup's `x_orig =
    # x.clone()`, then `x[i] = ...`): rewriting its argument is its job, and the caller's later
    # reads are the point.
    deliberate: bool = False
    # Written through an alias autograd does not track (`tensor.data.uniform_()` in an init
    # helper): the caller's leaf is written as through its own `.data`, which torch allows.
    hidden: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "condition", shared(self.condition))  # kept by the memo: one object per condition


@dataclass(eq=False, slots=True)
class Summary:
    params: tuple[str, ...]
    writes: list[ParamWrite] = field(default_factory=list)
    saves: dict[Slot, set[SaveRecord]] = field(default_factory=dict)
    returned: Value | None = None  # in the callee's storages; `slots` maps those of arguments
    slots: dict[int, Slot] = field(default_factory=dict)  # callee storage -> the argument slot it stands for
    # The parameter storages of modules passed in: (argument, rank among its module's storages).
    # What the run returns built over them (an optimizer) is over the caller's module's, whatever
    # run made it: modules alike enough to share a run hold alike parameters, made in one order.
    module_slots: dict[int, tuple[int, int]] = field(default_factory=dict)
    result_saves: dict[int, set[SaveRecord]] = field(default_factory=dict)  # callee storage it returns -> its saves
    self_updates: dict[str, Value] = field(default_factory=dict)  # `self.<name>` bound by the callee
    # `self.<name>` a hidden write left stale (`self.best = self.model.state_dict()`, then steps):
    # the caller's later read of it (`load_state_dict(self.best)` in `fit`) is the stale read.
    self_stale: dict[str, PendingWrite] = field(default_factory=dict)
    cell_updates: dict[Slot, Value] = field(default_factory=dict)  # lists/dicts passed in and filled
    cells: dict[int, Slot] = field(default_factory=dict)  # the cells of the lists/dicts passed in
    stable_saves: list[tuple[frozenset[int], SaveRecord]] = field(default_factory=list)  # on parameters
    mutations: list[Mutation] = field(default_factory=list)  # the findings the run proves by itself
    deferred: list[Mutation] = field(default_factory=list)  # those its caller's use of the result decides
    children: list[Summary] = field(default_factory=list)  # runs it reached
    files: frozenset[str] = frozenset()  # every file this summary was read from
    builds_inplace: bool = False  # returns or binds a module that writes its input: callers decide the damage
    writes_arguments: bool = False
    blind: bool = False  # used an argument nobody passed as an object: callers may prove more
    blind_writes: bool = False  # wrote one in place (`pitch[mask] = nan`): its owner may be further up
    hookable: bool = False  # wrote a tensor in place that a caller's module backward hook makes a view
    node: cst.FunctionDef | None = None  # the function this is a run of
    path: str = ""  # the file it lives in
    patches: dict[int, Module] = field(default_factory=dict)  # modules rewritten through an alias (construction)
    # The project classes the run instantiated, nested constructions included: a later run that
    # takes this one from the memo has built them too (`Engine.built`).
    classes: frozenset[ClassInfo] = frozenset()
    # The hooks the run put on modules, beyond those it was given: a Grad-CAM object's
    # `__init__` hooks a layer of the model its caller then runs.
    hooked: ModuleHooks = NO_HOOKS
    # Lists and dicts of other scopes the run filled (`engine.enclose`), under their `OUTER`
    # names, with the hidden write that made what they hold stale since, if any.
    outer: dict[str, tuple[Value, PendingWrite | None]] = field(default_factory=dict)
    training: list[TrainingEvent] = field(default_factory=list)  # steps and backwards of arguments
    # The graph order each argument carried into the run: a tensor it returns went through the
    # caller's graph of those arguments whose token its graph holds (`state.data @ w` none).
    arg_tokens: tuple[int, ...] = ()


EMPTY = Summary(params=())


def slot_storages(value: Value, base: Slot) -> dict[int, Slot]:
    """Each storage an argument holds, and the slot it is reached through."""
    found: dict[int, Slot] = {}
    if isinstance(value, Val):
        for storage in value.storages:
            found.setdefault(storage, base)
        for index, item in enumerate(value.items or ()):
            for storage, slot in slot_storages(item, (*base, index)).items():
                found.setdefault(storage, slot)
    elif isinstance(value, DictVal):
        for key, item in value.entries:
            for storage, slot in slot_storages(item, (*base, key)).items():
                found.setdefault(storage, slot)
    elif isinstance(value, Module):
        for name, item in value.config:  # a dataclass's fields as its building site passed them
            for storage, slot in slot_storages(item, (*base, name)).items():
                found.setdefault(storage, slot)
    return found


def _attribute_slots(module: Module, base: Slot, found: dict[int, Slot], seen: set[int]) -> None:
    """The tensors `module` holds as attributes, and those of its layers (NoisyLinear's buffers
    in a model's `nn.Sequential` head), each by its path from `base`: `(0, "fc_adv", 2,
    "epsilon_weight")`."""
    if module.ident in seen or len(base) > _MAX_ATTRIBUTE_DEPTH:
        return
    seen.add(module.ident)
    children: list[tuple[str | int, Value]] = list(enumerate(module.items or ()))
    if module.instance is not None:
        children += [(name, module.owned(attr)) for name, attr in module.instance.attrs.items()]
    for step, child in children:
        for _, option in options_of(child):
            if isinstance(option, Val) and option.is_tensor and option.items is None:
                for storage in option.storages:
                    found.setdefault(storage, (*base, step))
            elif isinstance(option, Module):
                _attribute_slots(option, (*base, step), found, seen)


# How deep in an object's layers its tensors are followed: a model, its head, the head's layer.
_MAX_ATTRIBUTE_DEPTH = 4


class SummaryRecorder:
    """Collects a summary while the interpreter runs a body with the arguments of one context."""

    def __init__(self, params: dict[str, Value]) -> None:
        self.names = tuple(params)
        self.by_storage: dict[int, Slot] = {}
        for index, value in enumerate(params.values()):
            for storage, slot in slot_storages(value, (index,)).items():
                self.by_storage.setdefault(storage, slot)
        self.cells: dict[int, Slot] = {
            value.cell: (index,)
            for index, value in enumerate(params.values())
            if isinstance(value, (Val, DictVal)) and value.cell is not None
        }
        # A ModuleList or Sequential passed in to be grown (`add_if_not_none(block, layer)`)
        self.containers = {
            value.ident: (index,)
            for index, value in enumerate(params.values())
            if isinstance(value, Module) and value.is_container
        }
        module_slots = {
            storage: (index, rank)
            for index, value in enumerate(params.values())
            for _, option in options_of(value)
            if isinstance(option, Module)
            for rank, storage in enumerate(sorted(option.params))
        }
        self.summary = Summary(params=self.names, slots=self.by_storage, module_slots=module_slots, cells=self.cells)
        self._values = tuple(params.values())

    @cached_property
    def attributes(self) -> dict[int, Slot]:
        """The tensors an object argument holds as attributes (MoCo's `self.queue`, which a
        helper method rewrites after `forward` saved it), by name: a write into them is the
        caller's write into that object's attribute. Only writes: what a method saves of its
        object's tensors is the object's (`stable_saves`). Made at the first write that needs
        it, not for every run."""
        found: dict[int, Slot] = {}
        for index, value in enumerate(self._values):
            for _, option in options_of(value):
                if isinstance(option, Module) and option.instance is not None and not option.is_container:
                    _attribute_slots(option, (index,), found, set())
        return found

    def slots_of(self, storages: frozenset[int]) -> list[Slot]:
        return sorted({self.by_storage[storage] for storage in storages if storage in self.by_storage}, key=repr)

    def on_write(self, storages: frozenset[int], write: ParamWrite) -> None:
        slots = self.slots_of(storages) or sorted(
            {self.attributes[storage] for storage in storages if storage in self.attributes}, key=repr
        )
        for slot in slots:
            candidate = replace(write, slot=slot)
            if candidate not in self.summary.writes:
                self.summary.writes.append(candidate)
                self.summary.writes_arguments = True

    def on_saves(self, saves: dict[int, frozenset[SaveRecord]], returned: frozenset[int]) -> None:
        for storage, records in saves.items():
            slot = self.by_storage.get(storage)
            if slot is not None:
                self.summary.saves.setdefault(slot, set()).update(records)
            elif storage in returned:
                self.summary.result_saves.setdefault(storage, set()).update(records)

    def finish(self, final: State, returned: Value | None, stable: frozenset[int]) -> Summary:
        summary = self.summary
        summary.returned = returned
        summary.self_stale = {
            name[5:]: pending
            for name, pending in final.stale.items()
            if name.startswith("self.") and name.count(".") == 1
        }
        for name, value in final.env.items():
            if name.startswith("self.") and name.count(".") == 1:
                summary.self_updates[name[5:]] = value
            if isinstance(value, (Val, DictVal)) and value.cell in self.cells:
                summary.cell_updates[self.cells[value.cell]] = value
            elif isinstance(value, Module) and value.ident in self.containers:
                summary.cell_updates[self.containers[value.ident]] = value
        for storage, records in final.saves.items():
            if storage in stable:
                for record in records:
                    summary.stable_saves.append((frozenset((storage,)), record))
        return summary
