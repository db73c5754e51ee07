"""The abstract values the interpreter computes, for construction code as for computation.

A tensor is abstracted to the set of storages it may live in (views share their base's storage
and version counter, so a write through any of them is a write to all), whether it may require
grad, and the saves its value depends on (its autograd ancestry). Construction code needs more:
Python constants and the configuration values nobody passed (`Sym`, with their defaults), classes
and functions as values, `functools.partial`, modules (what calling one does, from the torch
tables or from the project class it instantiates), dicts and lists that grow, optimizers. A value
that differs between the paths of a branch is a `Choice`, each option under its condition.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import IntEnum
from itertools import count
from typing import TYPE_CHECKING, TypeGuard, cast

from ..diagnostics import Span
from .conditions import Condition, consistent
from .shared import shared

if TYPE_CHECKING:
    import libcst as cst

    from .classes import ClassInfo, FunctionRef
    from .instances import Instance
    from .state import Site


class Grad(IntEnum):
    NO = 0  # cannot require grad: factories, detached, computed under no_grad, integer results
    UNKNOWN = 1  # a tensor of unknown provenance: a helper's `Tensor` argument nobody calls
    MAYBE = 2  # activations, module outputs, forward arguments
    LEAF = 3  # a leaf that requires grad (nn.Parameter, requires_grad=True), or a view of one


_ids = count(1)


def fresh_id() -> int:
    return next(_ids)


def fresh_storage() -> frozenset[int]:
    return frozenset((fresh_id(),))


@dataclass(frozen=True, slots=True)
class Val:
    """A tensor, or a tuple or list of values (`items`). Not a tensor when `storages` is empty;
    `Val()` is the value nothing is known about."""

    storages: frozenset[int] = frozenset()
    grad: Grad = Grad.NO
    origin: cst.CSTNode | None = field(
        default=None, compare=False, hash=False
    )  # node that made it (or the leaf it views)
    strided: bool = False  # a non-contiguous view: `.contiguous()` of it copies
    # The `expand` call it is a view of: its entries share memory, a write lands in all of them
    expanded: cst.CSTNode | None = None
    items: tuple[Value, ...] | None = None  # tuple-like results: chunk(), lstm outputs; list displays
    hidden: str | None = None  # "data" / "detach" / SNAPSHOT: an alias autograd does not track
    multi_view: str | None = None  # an output of chunk()/split()/unbind(): torch forbids writing it
    dtype: str | None = None  # when known: "bfloat16" under autocast, "float32" after .float()
    fresh_buffer: bool = False  # made by a factory (zeros, empty): an out-parameter a callee may fill
    opaque: bool = False  # returned by code we cannot see: may be a tuple or a dataclass of tensors
    graph: frozenset[int] = frozenset()  # orders of the saves this value was computed through
    # Which tensor of a module with a full backward hook this is ("the output of `m`"): a view
    # torch forbids writing.
    hooked: str | None = None
    # Created under inference_mode (where the mode was entered): writing it outside raises
    inference: tuple[str, Span] | None = None
    cell: int | None = None  # identity of a Python list, so that `append` reaches every name holding it
    cloned: bool = False  # made by `.clone()`: advice to clone it again would not help
    # (loop, round) for an element a loop of unknown rounds drew from a container: the elements
    # of different rounds are different tensors, though their abstract storages are the same.
    round: tuple[int, int] | None = field(default=None, compare=False, hash=False)
    # (storage, condition) for a storage the name holds only on some paths: after `if flag: h =
    # fresh` the old `h` is held only when `not flag`, so a save made under `flag` never met it.
    bound_when: tuple[tuple[int, Condition], ...] = field(default=(), compare=False, hash=False)

    @property
    def is_tensor(self) -> bool:
        return bool(self.storages)

    def view(self, strided: bool = False, expanded: cst.CSTNode | None = None) -> Val:
        return replace(
            self,
            strided=strided or self.strided,
            expanded=expanded or self.expanded,
            items=None,
            cell=None,
            cloned=False,
        )

    def held_when(self, condition: Condition) -> Val:
        """The tensors it may be on a path assuming `condition`: after `x = image if fp else
        image.to(torch.float32)`, a write under `not fp` writes the copy, never `image`."""
        if not self.bound_when:
            return self
        excluded = frozenset(storage for storage, when in self.bound_when if not consistent(when | condition))
        return replace(self, storages=self.storages - excluded) if excluded else self

    def part(self) -> Val:
        """One element of a tuple this value may be: a different tensor, nothing saved yet. An
        element of what unseen code returned may itself be a list (`for (xs, ys), _ in groups`)."""
        return Val(
            fresh_storage(),
            self.grad,
            self.origin,
            dtype=self.dtype,
            graph=self.graph,
            hooked=self.hooked,
            opaque=self.opaque,
        )

    def detached(self, how: str) -> Val:
        return replace(
            self, grad=Grad.NO, items=None, hidden=how, multi_view=None, graph=frozenset(), hooked=None, cell=None
        )


NOT_TENSOR = Val()
# How a `state_dict()` value aliases its module's parameters: detached (as `.detach()`), and
# taken to keep them as they are now, which the next optimizer step changes under it.
SNAPSHOT = "state_dict"


@dataclass(frozen=True, slots=True)
class Const:
    """A Python constant. `origin` is the literal it was written as (where a user would edit it),
    None when it came from a default or was computed."""

    value: object
    origin: cst.CSTNode | None = field(default=None, compare=False, hash=False)
    origin_path: str | None = field(default=None, compare=False, hash=False)


@dataclass(frozen=True, slots=True)
class Sym:
    """A configuration value the analysis does not know: a parameter no known caller passed, an
    attribute of a config object. `text` is how it reads in a condition; `default` is what it is
    when nobody passes it (None: no default)."""

    text: str
    default: Const | None = None


@dataclass(frozen=True, slots=True)
class Klass:
    """A class as a value: a torch class (`qualname`) or a project class (`ref`)."""

    name: str  # as a user would write it in a message
    qualname: str | None = None
    ref: ClassInfo | None = None  # a project class


@dataclass(frozen=True, slots=True)
class Func:
    """A function as a value: a torch callable (`qualname`), a project function (`ref`), or a
    method bound to its receiver (`bound`)."""

    name: str
    qualname: str | None = None
    ref: FunctionRef | None = None
    bound: Value | None = None
    # The lists and dicts of its enclosing scope a nested function fills, as they were when it
    # was defined: a hook registered there may run anywhere the module runs. (Capturing all it
    # reads made a helper's perturbation of `x.data` in torch's gradcheck look like a write to a
    # leaf, when neither a generator's yields nor a returned `.data` alias were followed; the
    # yields are now, and capturing more has not been tried again.)
    closure: tuple[tuple[str, Value], ...] = ()


# The name under which a run holds a list or dict of another scope that a function it called
# filled (a hook's closure, a module-level dict): passed on to its caller, never read by name.
OUTER = "_torchlint_outer_"


@dataclass(frozen=True, slots=True)
class Namespace:
    """A module as a value: a torch namespace (`nn`, `F`) or a project file (`import utils.ops as ops`)."""

    qualname: str | None = None
    path: str | None = None


@dataclass(frozen=True, slots=True)
class Super:
    """`super()` in a method of `cls`: its bases' methods, bound to the same `self`."""

    cls: ClassInfo


@dataclass(frozen=True, slots=True)
class Partial:
    """`functools.partial(target, *args, **kwargs)`."""

    target: Value
    args: tuple[Value, ...] = ()
    kwargs: tuple[tuple[str, Value], ...] = ()


@dataclass(frozen=True, slots=True)
class Module:
    """An nn.Module value: what calling it does to its input.

    `writes` is None for a module that never writes its input, else the condition under which
    it does (empty: always). `culprit` is where its in-place behaviour was decided: the literal
    `inplace=True` a user edits, else the call that built it. A project class's instance carries
    its `instance`; `params` are the storages of the parameters it and its submodules hold."""

    kind: str | None  # torch.nn class name; None for a project class instance or an unknown module
    label: str = ""  # the class as written: "ReLU", "Block"
    writes: Condition | None = None
    culprit: Site | None = None
    flag: cst.CSTNode | None = None  # the literal `True` node to switch off, when there is one
    items: tuple[Value, ...] | None = None  # Sequential / ModuleList / ModuleDict contents
    keys: tuple[str, ...] | None = None  # ModuleDict / named children
    # `items` are the container's layers one for one, as written (`nn.Sequential(a, b, c)`), not
    # grown in a loop or spread from a list: a layer may then be named by its index
    exact: bool = False
    instance: Instance | None = None
    params: frozenset[int] = frozenset()
    ident: int = field(default_factory=fresh_id)
    # A project class's instance built twice with the same arguments is one analysis (the memo's
    # `Instance`) but two objects: each construction names its own parameters, the instance's
    # storage -> this object's (`qf1 = Mlp(8)`, `qf2 = Mlp(8)`, one optimizer each).
    renamed: tuple[tuple[int, int], ...] = field(default=(), compare=False, hash=False)
    config: tuple[tuple[str, Value], ...] = ()  # constructor arguments the tables care about (p, max_norm)
    origin: cst.CSTNode | None = field(default=None, compare=False, hash=False)
    # What the tensors it was built with were computed through (`ModelOutput(logits=h)`): an
    # object returned or handed on carries them along.
    graph: frozenset[int] = field(default=frozenset(), compare=False, hash=False)
    # The `copy.copy(model)` that made this object: another module on the same parameters, which
    # a step over this one's rewrites under the original's holders.
    copied: cst.CSTNode | None = field(default=None, compare=False, hash=False)

    @property
    def is_container(self) -> bool:
        return self.items is not None

    def setting(self, name: str) -> Value | None:
        return next((value for key, value in self.config if key == name), None)

    def own_storages(self, storages: frozenset[int]) -> frozenset[int]:
        """The instance's parameter and buffer storages as this object's (see `renamed`)."""
        if not self.renamed:
            return storages
        names = dict(self.renamed)
        return frozenset(names.get(storage, storage) for storage in storages)

    def owned(self, value: Value) -> Value:
        """A submodule or tensor this object's attribute holds, as this object's:
        `model.head.parameters()` names the parameters `model(x)` saved."""
        if self.renamed and isinstance(value, Val) and value.is_tensor and value.items is None:
            storages = self.own_storages(value.storages)
            return value if storages == value.storages else replace(value, storages=storages)
        if not self.renamed or not isinstance(value, Module) or not (value.params or value.renamed):
            return value
        names = dict(self.renamed)
        items = tuple(self.owned(item) for item in value.items) if value.items is not None else None
        if value.renamed:
            renamed = tuple((inner, names.get(outer, outer)) for inner, outer in value.renamed)
            params = frozenset(names.get(outer, outer) for outer in value.params)
            return replace(value, params=params, renamed=renamed, items=items)
        return replace(value, params=self.own_storages(value.params), items=items)


@dataclass(frozen=True, slots=True)
class DictVal:
    """A dict: entries with constant keys, `rest` for what was stored under keys not known."""

    entries: tuple[tuple[object, Value], ...] = ()
    rest: Value | None = None
    cell: int | None = None

    def get(self, key: object) -> Value | None:
        return next((value for known, value in self.entries if known == key), None)

    def set(self, key: object, value: Value) -> DictVal:
        return replace(self, entries=(*self.without(key).entries, (key, value)))

    def without(self, key: object) -> DictVal:
        return replace(self, entries=tuple((known, old) for known, old in self.entries if known != key))

    def values(self) -> list[Value]:
        return [value for _, value in self.entries] + ([self.rest] if self.rest is not None else [])


@dataclass(frozen=True, slots=True)
class Params:
    """What `model.parameters()` returns: the parameter storages (None: not known)."""

    storages: frozenset[int] | None
    origin: cst.CSTNode | None = field(default=None, compare=False, hash=False)  # the call handing them out


@dataclass(frozen=True, slots=True)
class Optimizer:
    """An optimizer and the parameter storages it updates (None: not known)."""

    storages: frozenset[int] | None
    origin: cst.CSTNode | None = field(default=None, compare=False, hash=False)


@dataclass(frozen=True, slots=True)
class Choice:
    """One of several values, each under the condition that selects it on its path."""

    options: tuple[tuple[Condition, Value], ...]

    def __post_init__(self) -> None:
        """Options are never choices themselves: a choice among choices (a callee's result, itself a
        choice, materialized on each option of its receiver) is one flat choice, each option under
        both conditions, so that nesting cannot grow with call depth (torch's dynamo nested them
        sixty deep, 168,000 leaves in one value). Conditions are kept by the memo: one object each."""
        options: Iterable[tuple[Condition, Value]] = self.options
        if any(isinstance(value, Choice) for _, value in self.options):
            options = distinct_options(
                [
                    (condition | inner, option)
                    for condition, value in options
                    for inner, option in _options(value, frozenset())
                ]
            )
        object.__setattr__(self, "options", tuple((shared(condition), value) for condition, value in options))


Value = Val | Const | Sym | Klass | Func | Namespace | Super | Partial | Module | DictVal | Params | Optimizer | Choice

MAX_OPTIONS = 32


def distinct_options(options: Iterable[tuple[Condition, Value]]) -> list[tuple[Condition, Value]]:
    """The options a path can take, each value once, at most MAX_OPTIONS of them: a value met
    under several conditions is kept under the assumptions they share (it is there on each of
    those paths)."""
    unique: list[tuple[Condition, Value]] = []
    where: dict[Value, int] = {}  # the options kept, by value (a merge may meet 64 of them)
    for condition, value in options:
        if not consistent(condition):
            continue
        try:
            index = where.setdefault(value, len(unique))
        except TypeError:  # holds an unhashable constant: compared one by one
            index = next((i for i, (_, known) in enumerate(unique) if known == value), len(unique))
        if index < len(unique):
            unique[index] = (unique[index][0] & condition, value)
        elif len(unique) < MAX_OPTIONS:
            unique.append((condition, value))
    return unique


def merge_values(
    a: Value | None, b: Value | None, when_a: Condition = frozenset(), when_b: Condition = frozenset()
) -> Value:
    """What a name holds after paths that bound it to `a` and `b` meet. Tensors merge into one
    abstract tensor; other values that differ become a `Choice` under the conditions that told
    the paths apart (`when_a`, `when_b`), or stay apart without one."""
    if a is None or b is None:
        return a if b is None and a is not None else (b if b is not None else NOT_TENSOR)
    if a == b:
        return a
    if isinstance(a, Val) and isinstance(b, Val):
        if a.items is not None and b.items is not None:
            cell = a.cell if a.cell == b.cell else None
            if len(a.items) == len(b.items):
                items = tuple(merge_values(x, y, when_a, when_b) for x, y in zip(a.items, b.items, strict=False))
            else:  # a list that grew on one path: one element standing for all of them
                items = (merge_all(a.items + b.items),) if a.items or b.items else ()
            return replace(_merge_tensors(a, b), items=items, cell=cell)
        # A tensor met by a tuple (`self.mlp(h)` is a tensor or, for the MoE block, a tuple):
        # the merged tensor keeps what the dropped elements were computed through.
        return replace(
            _merge_tensors(a, b), bound_when=_bound_when(a, b, when_a, when_b), graph=graph_of(a) | graph_of(b)
        )
    if isinstance(a, Val) and not a.is_tensor and a.items is None:
        return b  # nothing known on one side: keep what the other knows
    if isinstance(b, Val) and not b.is_tensor and b.items is None:
        return a
    if isinstance(a, DictVal) and isinstance(b, DictVal):
        keys = [key for key, _ in a.entries] + [key for key, _ in b.entries if a.get(key) is None]
        entries = tuple((key, merge_values(a.get(key), b.get(key), when_a, when_b)) for key in keys)
        rest = merge_values(a.rest, b.rest, when_a, when_b) if a.rest is not None or b.rest is not None else None
        return DictVal(entries, rest, a.cell if a.cell == b.cell else None)
    unique = distinct_options(_options(a, when_a) + _options(b, when_b))
    return unique[0][1] if len(unique) == 1 else Choice(tuple(unique))


def _options(value: Value, when: Condition) -> list[tuple[Condition, Value]]:
    if isinstance(value, Choice):
        return [(condition | when, option) for condition, option in value.options]
    return [(when, value)]


def _bound_when(a: Val, b: Val, when_a: Condition, when_b: Condition) -> tuple[tuple[int, Condition], ...]:
    """Each storage's path condition after the merge: that of the one path that holds it, or
    what both paths that hold it agree on."""
    if not (when_a or when_b or a.bound_when or b.bound_when):
        return ()
    known_a, known_b = dict(a.bound_when), dict(b.bound_when)
    bound = []
    for storage in sorted(a.storages | b.storages):
        in_a = known_a.get(storage, frozenset()) | when_a if storage in a.storages else None
        in_b = known_b.get(storage, frozenset()) | when_b if storage in b.storages else None
        condition = in_a & in_b if in_a is not None and in_b is not None else in_a or in_b
        if condition:
            bound.append((storage, condition))
    return tuple(bound)


def _merge_tensors(a: Val, b: Val) -> Val:
    hidden, origin = _merged_alias(a, b)
    return Val(
        storages=a.storages | b.storages,
        grad=max(a.grad, b.grad),
        origin=origin,
        strided=a.strided and b.strided,
        expanded=a.expanded or b.expanded,
        hidden=hidden,
        multi_view=a.multi_view or b.multi_view,
        dtype=a.dtype if a.dtype == b.dtype else None,
        fresh_buffer=a.fresh_buffer and b.fresh_buffer,
        opaque=a.opaque or b.opaque,
        graph=a.graph | b.graph,
        hooked=a.hooked or b.hooked,
        inference=a.inference and b.inference,
        cloned=a.cloned and b.cloned,
        round=a.round if a.round == b.round else None,
    )


def _merged_alias(a: Val, b: Val) -> tuple[str | None, cst.CSTNode | None]:
    """How the merged tensor aliases, and where it was made. A `state_dict()` snapshot met by a
    tensor that aliases nothing (`copy.deepcopy(model.state_dict())` on the other path) stays a
    snapshot, made where it was taken: on its own path the next step still moves it."""
    if a.hidden != b.hidden:
        for kept, other in ((a, b), (b, a)):
            if kept.hidden == SNAPSHOT and other.hidden is None:
                return SNAPSHOT, kept.origin
        return None, a.origin or b.origin
    return a.hidden, a.origin or b.origin


def deep_copied_module(module: Module) -> Module:
    """What `copy.deepcopy(model)` returns: the same layers on parameters and buffers of their
    own (one per storage, as the copied ones were shared), a new object."""
    fresh: dict[int, int] = {}

    def new(storage: int) -> int:
        return fresh.setdefault(storage, fresh_id())

    def copy(item: Module) -> Module:
        items = (
            tuple(copy(inner) if isinstance(inner, Module) else inner for inner in item.items)
            if item.items is not None
            else None
        )
        renamed = item.renamed
        if item.instance is not None and not renamed:  # the instance's own storages, as built
            renamed = tuple((storage, storage) for storage in sorted(item.instance.owned))
        return replace(
            item,
            ident=fresh_id(),
            params=frozenset(map(new, item.params)),
            renamed=tuple((inner, new(outer)) for inner, outer in renamed),
            items=items,
            copied=None,
        )

    return copy(module)


def deep_copied(value: Value, origin: cst.CSTNode) -> Value | None:
    """What `copy.deepcopy(value)` returns: the same tuples, lists and dicts holding new tensors
    that alias nothing (one per storage: tensors that shared memory share their copy's), with
    no graph; None for a value it does not model (a module, an object)."""
    copies: dict[int, frozenset[int]] = {}

    def all_copied(values: Iterable[Value]) -> tuple[Value, ...] | None:
        copied = [copy(item) for item in values]
        kept = tuple(item for item in copied if item is not None)
        return kept if len(kept) == len(copied) else None

    def copy(item: Value) -> Value | None:
        if isinstance(item, Val):
            items = all_copied(item.items) if item.items is not None else None
            if item.items is not None and items is None:
                return None
            if not item.storages:
                return Val(items=items)
            storages = frozenset().union(*(copies.setdefault(storage, fresh_storage()) for storage in item.storages))
            grad = Grad.LEAF if item.grad is Grad.LEAF else Grad.NO
            return Val(storages, grad, origin=origin, dtype=item.dtype, items=items)
        if isinstance(item, DictVal):
            values = all_copied(item.values())
            if values is None:
                return None
            entries = tuple((key, copied) for (key, _), copied in zip(item.entries, values, strict=False))
            return DictVal(entries, values[-1] if item.rest is not None else None)
        return item if isinstance(item, Const) else None

    return copy(collapse(value))


def in_round(value: Value, round: tuple[int, int]) -> Value:
    """An element a loop binds in `round`: each tensor it holds marked as that round's."""
    if isinstance(value, Choice):
        return Choice(tuple((condition, in_round(option, round)) for condition, option in value.options))
    if not isinstance(value, Val):
        return value
    items = tuple(in_round(item, round) for item in value.items) if value.items is not None else None
    return replace(value, items=items, round=round if value.is_tensor else value.round)


def as_integer(value: Value) -> Value:
    """A value bound where an annotation says integer tensor (`input_ids: torch.LongTensor`):
    whatever the caller's tensor is, token ids and masks never require grad."""
    if isinstance(value, Choice):
        return Choice(tuple((condition, as_integer(option)) for condition, option in value.options))
    if not isinstance(value, Val) or not value.is_tensor:
        return value
    return replace(value, grad=Grad.NO, dtype=value.dtype or "int64", graph=frozenset())


def is_project_object(value: Value | None) -> TypeGuard[Module]:
    """An instance of a project class (a registry, a memory, a model)."""
    return isinstance(value, Module) and value.instance is not None


def object_slot(held: Module, attr: str) -> str:
    """The name under which a run holds an attribute an object's method changed where no name
    held the object (a forward hook's, called inside the model): handed up to the callers
    (`Summary.outer`), where the names holding the object see it (`slot_of_object`)."""
    return f"{OUTER}{_object_ident(held)}.{attr}"


def _object_ident(held: Module) -> str:
    """An object as its value (`Module.ident`, kept as its attributes change) and as the instance
    it was built as: a hook `__init__` registers (`m.register_forward_hook(self.hook_fn)`) is
    bound to the `self` of the construction, which the caller holds as another value."""
    return f"#{held.ident}#{id(held.instance)}"


def is_object(value: Value, ident: str) -> bool:
    """Whether `value` is the object `ident` (`_object_ident`) names."""
    _, value_ident, instance = ident.split("#")
    return any(
        isinstance(option, Module)
        and (str(option.ident) == value_ident or (option.instance is not None and str(id(option.instance)) == instance))
        for _, option in options_of(value)
    )


def slot_of_object(env: dict[str, Value], held: Value, attr: str) -> str | None:
    """The `object_slot` in `env` holding `attr` of the object `held`, if a method changed it."""
    prefix, suffix = OUTER + "#", "." + attr
    for name in env:
        if name.startswith(prefix) and name.endswith(suffix) and is_object(held, name[len(OUTER) : -len(suffix)]):
            return name
    return None


def is_container(value: Value) -> bool:
    """A list, tuple or dict (not a tensor, whose `items` are its outputs)."""
    return isinstance(value, DictVal) or (isinstance(value, Val) and not value.is_tensor and value.items is not None)


def other_round(a: Val, b: Val) -> bool:
    """Elements of one loop drawn in different rounds: different tensors."""
    return a.round is not None and b.round is not None and a.round[0] == b.round[0] and a.round != b.round


def options_of(value: Value) -> list[tuple[Condition, Value]]:
    """The alternatives a value stands for: itself, or each option of a `Choice`."""
    return list(value.options) if isinstance(value, Choice) else [(frozenset(), value)]


def collapse(value: Value) -> Value:
    """A `Choice` folded into one value, for the operations that do not branch on it: the merge
    of its tensors when it may be one (an optional tensor), else its one value, else unknown."""
    if not isinstance(value, Choice):
        return value
    tensors = [
        option
        for _, option in value.options
        if isinstance(option, Val) and (option.is_tensor or option.items is not None)
    ]
    if tensors:
        return merge_all(tensors)
    first = value.options[0][1]
    return first if all(option == first for _, option in value.options) else NOT_TENSOR


def tensor_condition(value: Value) -> Condition:
    """What a value assumes where it is a tensor: the conditions its tensor options share
    (`state` of `forward(self, h, state=None)` is one only when set)."""
    conditions = [condition for condition, option in options_of(value) if is_tensor(option)]
    return frozenset.intersection(*conditions) if conditions else frozenset()


def grad_of(value: Value | None) -> Grad:
    """Whether a value may require grad: a tensor's own, the most of a list's or tuple's."""
    return max((tensor.grad for tensor in tensors_in(value)), default=Grad.NO)


def as_tensor(value: Value) -> Val:
    """`collapse` of a value that `is_tensor` holds for: a tensor collapses to a `Val`."""
    return cast(Val, collapse(value))


def is_tensor(value: Value | None) -> bool:
    if isinstance(value, Choice):
        value = collapse(value)
    return isinstance(value, Val) and value.is_tensor


def is_tensor_val(value: Value | None) -> TypeGuard[Val]:
    """`is_tensor` of a value that is not a `Choice` (one `collapse`d already): a tensor is then a `Val`."""
    return is_tensor(value)


def tensors_in(value: Value | None) -> list[Val]:
    """The tensors a value holds: itself, or the elements of a tuple, list or dict, recursively."""
    if value is None:
        return []
    if isinstance(value, Choice):
        return [tensor for _, option in value.options for tensor in tensors_in(option)]
    if isinstance(value, DictVal):
        return [tensor for item in value.values() for tensor in tensors_in(item)]
    if isinstance(value, Module):
        return [tensor for _, item in value.config for tensor in tensors_in(item)]  # a dataclass's fields
    if not isinstance(value, Val):
        return []
    found = [value] if value.is_tensor else []
    for item in value.items or ():
        found.extend(tensors_in(item))
    return found


def reachable(value: Value) -> frozenset[int]:
    """Every storage a value can reach: a tensor's own, its elements', a module's parameters."""
    found = frozenset().union(*(tensor.storages for tensor in tensors_in(value)))
    for _, option in options_of(value):
        if isinstance(option, Module):
            found |= option.params
        elif isinstance(option, (Optimizer, Params)) and option.storages is not None:
            found |= option.storages
    return found


def with_graph(value: Value, graph: frozenset[int]) -> Value:
    if isinstance(value, Val) and value.is_tensor and value.grad > Grad.NO:
        return replace(value, graph=value.graph | graph)
    if isinstance(value, Val) and value.items is not None:
        return replace(value, items=tuple(with_graph(item, graph) for item in value.items))
    if isinstance(value, Choice):
        return Choice(tuple((condition, with_graph(option, graph)) for condition, option in value.options))
    if isinstance(value, Module) and value.config:
        return replace(value, config=tuple((name, with_graph(item, graph)) for name, item in value.config))
    return value


def graph_of(value: Value | None) -> frozenset[int]:
    found = frozenset().union(*(tensor.graph for tensor in tensors_in(value)))
    if value is None:
        return found
    return found.union(*(option.graph for _, option in options_of(value) if isinstance(option, Module)))


def item_of(value: Value, index: int) -> Value:
    value = collapse(value)
    if isinstance(value, Val) and value.items is not None:
        if -len(value.items) <= index < len(value.items):
            return value.items[index]
        return element_of(value) if value.cell is not None else NOT_TENSOR  # a grown list: any element
    if isinstance(value, Module) and value.items is not None:
        return value.items[index] if -len(value.items) <= index < len(value.items) else NOT_TENSOR
    return element_of(value)


def element_of(value: Value, loop: cst.CSTNode | None = None) -> Value:
    """An element of an iterable: a view for a tensor, the merge of a container's items. Where a
    `for` loop iterates a tensor, the loop's iterable is where its `unbind()` views are made."""
    if isinstance(value, Choice):
        return collapse(Choice(tuple((condition, element_of(option, loop)) for condition, option in value.options)))
    if isinstance(value, Module):
        return merge_all(value.items or ())
    if isinstance(value, DictVal):
        return merge_all([Const(key) for key, _ in value.entries]) if value.entries else NOT_TENSOR
    if isinstance(value, Val) and value.is_tensor:
        if value.opaque:  # what code we cannot see returned: likely a list or tuple of tensors
            return value.part()
        # Iterating a tensor unbinds it; iterating the outputs of `chunk()` gives those outputs.
        return replace(value.view(), multi_view=value.multi_view or "unbind", origin=loop or value.origin)
    if isinstance(value, Val) and value.items:
        return merge_all(value.items)
    if isinstance(value, Params):
        # `for p in model.parameters()`: leaves that require grad (the model's, when known).
        return Val(value.storages if value.storages else fresh_storage(), Grad.LEAF, origin=value.origin)
    return NOT_TENSOR


def merge_all(values: Iterable[Value]) -> Value:
    merged: Value | None = None
    for value in values:
        merged = value if merged is None else merge_values(merged, value)
    return merged if merged is not None else NOT_TENSOR


def nonempty(value: Value) -> bool:
    """A container known to hold at least one element: a loop over it runs at least once."""
    if isinstance(value, Module):
        return bool(value.items)
    if isinstance(value, Val):
        return bool(value.items) and not value.is_tensor
    if isinstance(value, DictVal):
        return bool(value.entries)
    return False
