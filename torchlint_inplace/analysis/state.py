"""What the interpreter knows at one point of one path, and how paths merge.

Besides what each name holds, a path knows which storages autograd saved for backward (and at
which version: the saves made before a write are the ones it breaks), what it assumed to get
here, which saves a `backward()` already consumed or kept alive, the optimizer steps taken, and
which parts of the graph left the function other than by its return value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from itertools import count
from typing import TYPE_CHECKING

from .conditions import Assumption, Condition, consistent
from .shared import shared
from .values import NOT_TENSOR, Choice, Val, Value, is_tensor, merge_values, reachable

# The writes one stale name reports when read, the first included (`PendingWrite.then`).
MAX_LATER_WRITES = 8

if TYPE_CHECKING:
    import libcst as cst

    from ..diagnostics import Related
    from .model import Form

_record_order = count()


def next_order() -> int:
    """One clock for saves and optimizer steps: which came first is what TIP009 asks."""
    return next(_record_order)


@dataclass(frozen=True, slots=True)
class SaveRecord:
    """An op that saved a tensor for backward: the version autograd will check.

    Nodes, not positions: positions cost a pass over the whole module, paid only when a
    finding is actually reported.
    """

    op: str  # how the user wrote the op: `*`, `torch.sigmoid`, `self.fc` (Linear)
    what: str  # the saved operand as written, or "its result"
    node: cst.CSTNode = field(compare=False, hash=False)
    certain: bool = True  # False when only tensors of unknown provenance made the op save
    order: int = field(default_factory=next_order)
    storages: frozenset[int] = field(default=frozenset(), compare=False, hash=False)
    # What the path assumed when the op ran (`activate == 'mish'`): a save only the option of a
    # configuration makes breaks a later write only under that configuration.
    condition: Condition = field(default=frozenset(), compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "condition", shared(self.condition))  # kept by the memo: one object per condition


@dataclass(frozen=True, slots=True)
class Site:
    """Where a finding is reported: the node, and the file it lives in (a callee's may differ)."""

    path: str
    node: cst.CSTNode


@dataclass(frozen=True, slots=True)
class PendingWrite:
    """A hidden in-place write (an inplace activation, a callee writing its argument) whose
    damage shows only if an alias bound before it is read afterwards."""

    form: Form
    site: Site
    action: str
    written: str
    condition: Condition = frozenset()
    # The call that ran an in-place module built elsewhere, as a related location.
    related: tuple[Callable[[], Related], ...] = ()
    flag: cst.CSTNode | None = None  # the literal `inplace=True` a fix switches off
    # When the name is a list or dict that holds the tensor: the tensor's storages (an item read
    # is stale only if it is that tensor).
    held: frozenset[int] = frozenset()
    # The name is a dict or list that held the written tensor itself, taken out to be written
    # (`labels = batch["input_ids"]`): stale only once it holds the tensor under two entries
    # (`batch["labels"] = labels`), where one was meant to keep the old values.
    twice: bool = False
    advice: str = "pass a `.clone()`, or use the out-of-place form (inplace=False)"
    kept: str = "the same tensor"  # what the name still refers to: a module copy, its parameters
    # Writes elsewhere that changed the same tensor under the name before it was read (a
    # pipeline of augmentations each rewriting the caller's batch): each is a line to fix.
    later: tuple[PendingWrite, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "condition", shared(self.condition))  # kept by the memo: one object per condition

    def then(self, other: PendingWrite) -> PendingWrite:
        """This write, and `other` after it (at most MAX_LATER_WRITES, one per site)."""
        if other.site == self.site or any(other.site == known.site for known in self.later):
            return self
        return replace(self, later=self.later + (other,)) if len(self.later) < MAX_LATER_WRITES else self


@dataclass(frozen=True, slots=True)
class Step:
    """An optimizer step: the storages it rewrote (None: not known) after the saves made before it.
    `reload`: `load_state_dict`, which rewrites them the same way."""

    site: Site
    order: int
    storages: frozenset[int] | None
    condition: Condition = frozenset()
    reload: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "condition", shared(self.condition))  # kept by the memo: one object per condition


@dataclass(frozen=True, slots=True)
class ArgumentBackward:
    """A callee's `loss.backward()` on what its caller passed (`self.backward(gen_loss,
    dis_loss)`): replayed at the call, on the caller's loss, between the callee's steps."""

    slot: tuple[object, ...]
    retain: bool


# What a run did to training, in order, that its caller must replay: its optimizer steps and
# its backwards through the caller's graphs.
TrainingEvent = Step | ArgumentBackward


@dataclass(frozen=True, slots=True)
class ModuleHooks:
    """The hooks put on modules so far on a path, by module ident: full backward hooks make a
    module's inputs and outputs views torch forbids writing; forward hooks (and pre-hooks) are
    functions that run with the module's inputs (and output) whenever it is called."""

    backward: frozenset[int] = frozenset()
    forward: tuple[tuple[int, bool, Value], ...] = ()  # (module, runs before forward, the hook)

    def __contains__(self, module: int) -> bool:
        return module in self.backward

    def __bool__(self) -> bool:
        return bool(self.backward or self.forward)

    def __or__(self, other: ModuleHooks) -> ModuleHooks:
        if not other:
            return self
        added = tuple(hook for hook in other.forward if hook not in self.forward)
        return ModuleHooks(shared(self.backward | other.backward), self.forward + added)

    def __sub__(self, other: ModuleHooks) -> ModuleHooks:
        """What this path added to `other`, the hooks it started with."""
        return ModuleHooks(
            shared(self.backward - other.backward), tuple(hook for hook in self.forward if hook not in other.forward)
        )

    def with_backward(self, module: int) -> ModuleHooks:
        return ModuleHooks(shared(self.backward | {module}), self.forward)

    def with_forward(self, module: int, before: bool, hook: Value) -> ModuleHooks:
        return ModuleHooks(self.backward, (*self.forward, (module, before, hook)))

    def of(self, module: int, before: bool) -> list[Value]:
        return [hook for ident, runs_before, hook in self.forward if ident == module and runs_before == before]


NO_HOOKS = ModuleHooks()


@dataclass
class State:
    env: dict[str, Value] = field(default_factory=dict)
    saves: dict[int, frozenset[SaveRecord]] = field(default_factory=dict)
    dead: bool = False  # the path returned or raised
    stale: dict[str, PendingWrite] = field(default_factory=dict)  # names whose value was rewritten under them
    assumed: dict[tuple[str, str], Assumption] = field(default_factory=dict)
    freed: frozenset[int] = frozenset()  # saves a backward() consumed
    retained: frozenset[int] = frozenset()  # saves a backward(retain_graph=True) kept alive
    steps: tuple[Step, ...] = ()
    escaped: frozenset[int] = frozenset()  # graph that left other than by `return`
    hooked: ModuleHooks = NO_HOOKS

    def copy(self) -> State:
        return State(
            dict(self.env), dict(self.saves), self.dead, dict(self.stale), dict(self.assumed),
            self.freed, self.retained, self.steps, self.escaped, self.hooked,
        )  # fmt: skip

    @property
    def condition(self) -> Condition:
        return frozenset(self.assumed.values())

    def saves_of(self, val: Val) -> list[SaveRecord]:
        """The live saves of the tensors `val` may be, less those made only on paths where it
        is not that tensor (`val.bound_when`)."""
        found: set[SaveRecord] = set()
        bound_when = dict(val.bound_when)
        for storage in val.storages:
            records = self.saves.get(storage, frozenset())
            when = bound_when.get(storage)
            found |= records if when is None else {record for record in records if consistent(record.condition | when)}
        return sorted((record for record in found if record.order not in self.freed), key=lambda record: record.order)

    def add_save(self, val: Val, record: SaveRecord) -> None:
        for storage in val.storages:
            self.saves[storage] = self.saves.get(storage, frozenset()) | {record}

    def adopt(self, paths: list[State], held: Sequence[Value] = ()) -> None:
        """Becomes the state where `paths`, copies of it that ran apart, meet (`merge_states`)."""
        self.__dict__.update(merge_states(paths, held).__dict__)

    def assume(self, assumption: Assumption) -> None:
        self.assumed[assumption.key] = assumption


def _prune(state: State, held: Sequence[Value] = ()) -> State:
    """Forget saves on storages no name can reach any more on this path.

    Without this, `if c: out = bn(out)` followed by `out += identity` would blame bn's save of
    the old `out` on the path where `out` was rebound, after the branches are merged.
    """
    if not state.saves:
        return state
    values = [*state.env.values(), *held]
    live = frozenset().union(*(reachable(value) for value in values)) if values else frozenset()
    pruned = state.copy()
    pruned.saves = {storage: records for storage, records in state.saves.items() if storage in live}
    return pruned


def merge_states(states: list[State], held: Sequence[Value] = ()) -> State:
    """The state after paths meet. `held`: values the paths computed that no name holds yet (an
    `a if c else b` expression's sides, a call's result on each option of its callee): their
    saves stay."""
    live = [state for state in states if not state.dead]
    if not live:
        return State(dead=True)
    if len(live) == 1:
        return live[0].copy()
    live = [_prune(state, held) for state in live]  # not copies when nothing was pruned: read only
    common = {
        key: assumption
        for key, assumption in live[0].assumed.items()
        if all(other.assumed.get(key) == assumption for other in live[1:])
    }
    own = [frozenset(a for key, a in state.assumed.items() if key not in common) for state in live]
    merged = live[0].copy()
    merged.assumed = common
    when_merged = own[0]
    for other, when_other in zip(live[1:], own[1:], strict=False):
        for name in merged.env.keys() | other.env.keys():
            mine, theirs = merged.env.get(name), other.env.get(name)
            if mine is theirs:
                continue
            if (
                (mine is None or theirs is None)
                and (when_merged or when_other)
                and not is_tensor(mine if theirs is None else theirs)
            ):
                # Bound on one path only (`if act == "relu": self.act = nn.ReLU()`): the value
                # keeps the condition of the path that bound it.
                mine, theirs = mine if mine is not None else NOT_TENSOR, theirs if theirs is not None else NOT_TENSOR
                merged.env[name] = Choice(((when_merged, mine), (when_other, theirs)))
                continue
            merged.env[name] = merge_values(mine, theirs, when_merged, when_other)
        for storage, records in other.saves.items():
            merged.saves[storage] = merged.saves.get(storage, frozenset()) | records
        for name, pending in other.stale.items():
            merged.stale.setdefault(name, pending)
        merged.freed &= other.freed
        merged.retained |= other.retained
        merged.steps += tuple(step for step in other.steps if step not in merged.steps)
        merged.escaped |= other.escaped
        merged.hooked |= other.hooked
        when_merged = frozenset()  # later options already carry their own conditions
    return merged
