"""The abstract values the interpreter tracks for each name, and the per-path state.

A tensor is abstracted to the set of storages it may live in (views share their base's
storage and version counter, so a write through any of them is a write to all) and whether it
may require grad. What autograd saved is a fact about a storage, recorded along the path.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import IntEnum
from itertools import count

from ..diagnostics import Span


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
    origin: Span | None = None  # where this tensor (or the leaf it views) was made
    strided: bool = False  # a non-contiguous view: `.contiguous()` of it copies
    items: tuple["Value", ...] | None = None  # tuple-like results: chunk(), lstm outputs

    @property
    def is_tensor(self) -> bool:
        return bool(self.storages)

    def view(self, strided: bool = False) -> "Val":
        return replace(self, strided=strided or self.strided, items=None)

    def detached(self) -> "Val":
        return replace(self, grad=Grad.NO, items=None)


NOT_TENSOR = Val()


@dataclass(frozen=True)
class ModuleRef:
    """An nn.Module held in an attribute: what calling it does to its input."""

    kind: str | None  # torch.nn class name, None for project or unknown classes
    inplace: bool = False
    items: tuple["ModuleRef", ...] | None = None  # nn.Sequential / nn.ModuleList contents
    origin: Span | None = None


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
        )
    return a if isinstance(a, ModuleRef) else b


@dataclass(frozen=True)
class SaveRecord:
    """An op that saved a tensor for backward: the version autograd will check."""

    op: str  # how the user wrote the op: `*`, `torch.sigmoid`, `self.fc` (Linear)
    what: str  # the saved operand as written, or "its result"
    span: Span
    certain: bool  # False when only tensors of unknown provenance made the op save


@dataclass
class State:
    env: dict[str, Value] = field(default_factory=dict)
    saves: dict[int, frozenset[SaveRecord]] = field(default_factory=dict)
    dead: bool = False  # the path returned or raised

    def copy(self) -> "State":
        return State(dict(self.env), dict(self.saves), self.dead)

    def saves_of(self, val: Val) -> list[SaveRecord]:
        found = set()
        for storage in val.storages:
            found |= self.saves.get(storage, frozenset())
        return sorted(found, key=lambda record: (record.span, record.op))

    def add_save(self, val: Val, record: SaveRecord) -> None:
        for storage in val.storages:
            self.saves[storage] = self.saves.get(storage, frozenset()) | {record}


def merge_states(states: list[State]) -> State:
    live = [state for state in states if not state.dead]
    if not live:
        return State(dead=True)
    merged = live[0].copy()
    for other in live[1:]:
        for name in merged.env.keys() | other.env.keys():
            merged.env[name] = merge_values(merged.env.get(name), other.env.get(name))
        for storage, records in other.saves.items():
            merged.saves[storage] = merged.saves.get(storage, frozenset()) | records
    return merged
