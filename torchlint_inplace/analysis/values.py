"""The abstract values the interpreter tracks for each name, and the per-path state.

A tensor is abstracted to the set of storages it may live in (views share their base's
storage and version counter, so a write through any of them is a write to all) and whether it
may require grad. What autograd saved is a fact about a storage, recorded along the path.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import IntEnum
from itertools import count



class Grad(IntEnum):
    NO = 0  # cannot require grad: factories, detached, computed under no_grad
    UNKNOWN = 1  # a tensor of unknown provenance: a helper's `Tensor` argument
    MAYBE = 2  # activations, module outputs, forward arguments
    LEAF = 3  # a leaf that requires grad (nn.Parameter, requires_grad=True), or a view of one


_storage_ids = count(1)


def fresh_storage() -> frozenset[int]:
    return frozenset((next(_storage_ids),))


@dataclass(frozen=True)
class Val:
    """What a name holds. Not a tensor when `storages` is empty."""

    storages: frozenset[int] = frozenset()
    grad: Grad = Grad.NO
    origin: object = field(default=None, compare=False, hash=False)  # node that made it (or the leaf it views)
    strided: bool = False  # a non-contiguous view: `.contiguous()` of it copies
    items: tuple["Value", ...] | None = None  # tuple-like results: chunk(), lstm outputs
    hidden: str | None = None  # "data" / "detach": an alias autograd does not track
    multi_view: str | None = None  # an output of chunk()/split()/unbind(): torch forbids writing it
    dtype: str | None = None  # when known: "bfloat16" under autocast, "float32" after .float()
    fresh_buffer: bool = False  # made by a factory (zeros, empty): an out-parameter a callee may fill
    opaque: bool = False  # returned by code we cannot see: may be a tuple or a dataclass of tensors

    @property
    def is_tensor(self) -> bool:
        return bool(self.storages)

    def view(self, strided: bool = False) -> "Val":
        return replace(self, strided=strided or self.strided, items=None)

    def part(self) -> "Val":
        """One element of a tuple this value may be: a different tensor, nothing saved yet."""
        return Val(fresh_storage(), self.grad, self.origin, dtype=self.dtype)

    def detached(self, how: str) -> "Val":
        return replace(self, grad=Grad.NO, items=None, hidden=how, multi_view=None)


NOT_TENSOR = Val()


@dataclass(frozen=True)
class ModuleRef:
    """An nn.Module held in an attribute: what calling it does to its input."""

    kind: str | None  # torch.nn class name, None for project or unknown classes
    inplace: bool = False
    items: tuple["ModuleRef", ...] | None = None  # nn.Sequential / nn.ModuleList contents
    origin: object = field(default=None, compare=False, hash=False)
    cls_name: str | None = None  # the project class it was built from, as written


Value = Val | ModuleRef


def merge_values(a: Value | None, b: Value | None) -> Value:
    if a is None or b is None:
        return a or b or NOT_TENSOR
    if a == b:
        return a
    if isinstance(a, Val) and isinstance(b, Val):
        return Val(
            storages=a.storages | b.storages,
            grad=max(a.grad, b.grad),
            origin=a.origin or b.origin,
            strided=a.strided and b.strided,
            hidden=a.hidden if a.hidden == b.hidden else None,
            multi_view=a.multi_view or b.multi_view,
            dtype=a.dtype if a.dtype == b.dtype else None,
            fresh_buffer=a.fresh_buffer and b.fresh_buffer,
            opaque=a.opaque or b.opaque,
        )
    return a if isinstance(a, ModuleRef) else b


_record_order = count()


@dataclass(frozen=True)
class SaveRecord:
    """An op that saved a tensor for backward: the version autograd will check.

    Nodes, not positions: positions cost a pass over the whole module, paid only when a
    finding is actually reported.
    """

    op: str  # how the user wrote the op: `*`, `torch.sigmoid`, `self.fc` (Linear)
    what: str  # the saved operand as written, or "its result"
    node: object = field(compare=False, hash=False)
    certain: bool = True  # False when only tensors of unknown provenance made the op save
    order: int = field(default_factory=lambda: next(_record_order))


@dataclass(frozen=True)
class Site:
    """Where a finding is reported: the node, and the file it lives in (a callee's may differ)."""

    path: str
    node: object = field(compare=False)


@dataclass(frozen=True)
class PendingWrite:
    """A hidden in-place write (an inplace activation, a callee writing its argument) whose
    damage shows only if an alias bound before it is read afterwards."""

    form: object
    site: Site
    action: str
    written: str


@dataclass
class State:
    env: dict[str, Value] = field(default_factory=dict)
    saves: dict[int, frozenset[SaveRecord]] = field(default_factory=dict)
    dead: bool = False  # the path returned or raised
    stale: dict[str, PendingWrite] = field(default_factory=dict)  # names whose value was rewritten under them
    retained: object = None  # the `backward(retain_graph=True)` call whose graph is still alive
    steps: frozenset[Site] = frozenset()  # optimizer steps taken since that backward

    def copy(self) -> "State":
        return State(dict(self.env), dict(self.saves), self.dead, dict(self.stale), self.retained, self.steps)

    def saves_of(self, val: Val) -> list[SaveRecord]:
        found = set()
        for storage in val.storages:
            found |= self.saves.get(storage, frozenset())
        return sorted(found, key=lambda record: record.order)

    def add_save(self, val: Val, record: SaveRecord) -> None:
        for storage in val.storages:
            self.saves[storage] = self.saves.get(storage, frozenset()) | {record}


def reachable(value: Value) -> frozenset[int]:
    if isinstance(value, Val):
        found = value.storages
        for item in value.items or ():
            found |= reachable(item)
        return found
    return frozenset()


def _prune(state: State) -> State:
    """Forget saves on storages no name can reach any more on this path.

    Without this, `if c: out = bn(out)` followed by `out += identity` would blame bn's save of
    the old `out` on the path where `out` was rebound, after the branches are merged.
    """
    live = frozenset().union(*(reachable(value) for value in state.env.values())) if state.env else frozenset()
    pruned = state.copy()
    pruned.saves = {storage: records for storage, records in state.saves.items() if storage in live}
    return pruned


def merge_states(states: list[State]) -> State:
    live = [state for state in states if not state.dead]
    if not live:
        return State(dead=True)
    if len(live) > 1:
        live = [_prune(state) for state in live]
    merged = live[0].copy()
    for other in live[1:]:
        for name in merged.env.keys() | other.env.keys():
            merged.env[name] = merge_values(merged.env.get(name), other.env.get(name))
        for storage, records in other.saves.items():
            merged.saves[storage] = merged.saves.get(storage, frozenset()) | records
        for name, pending in other.stale.items():
            merged.stale.setdefault(name, pending)
        merged.retained = merged.retained or other.retained
        merged.steps |= other.steps
    return merged


def grad_of(value: Value | None) -> Grad:
    return value.grad if isinstance(value, Val) and value.is_tensor else Grad.NO


def is_tensor(value: Value | None) -> bool:
    return isinstance(value, Val) and value.is_tensor


def storages_within(value: Value) -> frozenset[int]:
    """The storages of a tensor, or of every tensor in a tuple-like value."""
    if not isinstance(value, Val):
        return frozenset()
    return value.storages.union(*map(storages_within, value.items or ()))


def item_of(value: Value, index: int) -> Value:
    if isinstance(value, Val) and value.items is not None:
        return value.items[index] if 0 <= index < len(value.items) else NOT_TENSOR
    return element_of(value)


def element_of(value: Value) -> Value:
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
