"""Instances of project classes: what interpreting `__init__` with one set of arguments built.

An instance is keyed by its class and the abstract values of the arguments of the site that
builds it, so that `Head(256, dropout=0.5)` and `Head(256)` are different modules and one site
that builds many (`[Block(dim) for _ in range(depth)]`) is one. Its attributes are the values
`__init__` (and the base classes' `__init__`, and the helpers they call) bound to `self.<name>`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from .values import Choice, Grad, Module, Val, Value, fresh_id, reachable

if TYPE_CHECKING:
    from .classes import ClassInfo
    from .summaries import Summary


@dataclass(eq=False, slots=True)
class Instance:
    """Compared by identity: two sites with the same arguments share one (it is memoised)."""

    cls: ClassInfo
    attrs: dict[str, Value] = field(default_factory=dict)
    # A subclass of a torch container built with items (`super().__init__(*layers)`).
    container: Module | None = None
    built: Summary | None = None  # the run of `__init__`: its findings and the runs it reached
    label: str = ""
    classes: frozenset[ClassInfo] = frozenset()  # its own class and every one built to build it
    # `owned` as last computed, for the attributes and container it was computed from: every run
    # of a method asks for it, and a model's layers are many.
    _owned: tuple[int, int, frozenset[int]] | None = field(default=None, init=False, repr=False)

    def attr(self, name: str) -> Value | None:
        return self.attrs.get(name)

    @property
    def params(self) -> frozenset[int]:
        found: set[int] = set()
        for value in self.attrs.values():
            found |= parameters_of(value)
        if self.container is not None:
            found |= self.container.params
        return frozenset(found)

    @property
    def owned(self) -> frozenset[int]:
        """Its parameters and the other tensors it holds as attributes (buffers: NoisyLinear's
        `epsilon_weight`, which each forward redraws in place): what a run of a method saves of
        them is still saved when the method runs again, and each object built from this
        instance has its own (`Module.renamed`)."""
        key = (id(self.attrs), id(self.container))
        if self._owned is None or self._owned[:2] != key:
            self._owned = (*key, self.owned_apart_from(set()))
        return self._owned[2]

    def owned_apart_from(self, seen: set[int]) -> frozenset[int]:
        """`owned`, not entering the instances in `seen` (a callback holding the trainer that
        holds it)."""
        seen.add(id(self))
        found = set(self.params)
        for value in self.attrs.values():
            found |= owned_storages(value, seen)
        return frozenset(found)


def owned_storages(value: Value, seen: set[int]) -> frozenset[int]:
    """The parameters and buffers a value holds (a module's, its layers', a tensor's own), as
    the object holding them names them; the instances in `seen` are not entered again."""
    if isinstance(value, Module):
        found = set(value.params)
        if value.instance is not None and id(value.instance) not in seen:
            found |= value.own_storages(value.instance.owned_apart_from(seen))
        for item in value.items or ():
            found |= owned_storages(item, seen)
        return frozenset(found)
    if isinstance(value, Val) and value.is_tensor and value.items is None:
        return value.storages
    if isinstance(value, Val):
        return frozenset().union(*(owned_storages(item, seen) for item in value.items or ()))
    return frozenset()


def parameters_of(value: Value) -> frozenset[int]:
    """The parameter storages a value holds: a module's, or a leaf tensor's own."""
    if isinstance(value, Module):
        return value.params
    if isinstance(value, Val) and value.is_tensor and value.grad is Grad.LEAF:
        return value.storages
    if isinstance(value, Val):
        return frozenset().union(*(parameters_of(item) for item in value.items or ()))
    return frozenset()


def submodules(
    value: Value, seen: set[int] | None = None, own: dict[str, Value] | None = None, name: str = ""
) -> list[tuple[str, Module]]:
    """A module and every module inside it, each once with its dotted name, as
    `model.named_modules()` yields them (`("features.0.2", ReLU)`). `own`: the attributes of a
    module still being built (`self.modules()` inside `__init__`), as `self.<name>`."""
    seen = set() if seen is None else seen
    if isinstance(value, Choice):
        return [found for _, option in value.options for found in submodules(option, seen, name=name)]
    if not isinstance(value, Module) or value.ident in seen:
        return []
    seen.add(value.ident)
    found = [(name, value)]
    children: list[tuple[str, Value]] = _named_items(value)
    if own is not None:
        children += [(attr.removeprefix("self."), child) for attr, child in own.items()]
    elif value.instance is not None:
        children += list(value.instance.attrs.items())
        if value.instance.container is not None:
            children += _named_items(value.instance.container)
    for key, child in children:
        if isinstance(child, Val) and child.items is not None:
            for index, item in enumerate(child.items):
                found += submodules(item, seen, name=_joined(name, f"{key}.{index}"))
        else:
            found += submodules(child, seen, name=_joined(name, key))
    return found


def _named_items(container: Module) -> list[tuple[str, Value]]:
    items = container.items or ()
    keys = container.keys if container.keys is not None and len(container.keys) == len(items) else None
    return [(keys[index] if keys is not None else str(index), item) for index, item in enumerate(items)]


def _joined(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def patched(value: Value, patches: dict[int, Module]) -> Value:
    """`value` with the modules `patches` rewrote (`m.inplace = True` over `self.modules()`),
    through containers and the attributes of project instances (copied, never changed: an
    instance is shared by every site that builds it with the same arguments)."""
    if not patches:
        return value
    if isinstance(value, Choice):
        options = tuple((condition, patched(option, patches)) for condition, option in value.options)
        return Choice(options) if options != value.options else value
    if isinstance(value, Module):
        value = patches.get(value.ident, value)
        if value.items is not None:
            items = tuple(patched(item, patches) for item in value.items)
            if items != value.items:
                value = replace(value, items=items)
        if value.instance is not None:
            attrs = {name: patched(attr, patches) for name, attr in value.instance.attrs.items()}
            if any(attrs[name] is not attr for name, attr in value.instance.attrs.items()):
                instance = Instance(
                    value.instance.cls,
                    attrs,
                    value.instance.container,
                    value.instance.built,
                    value.instance.label,
                    value.instance.classes,
                )
                value = replace(value, instance=instance, ident=fresh_id())
        return value
    if isinstance(value, Val) and value.items is not None and not reachable(value):
        items = tuple(patched(item, patches) for item in value.items)
        return replace(value, items=items) if items != value.items else value
    return value
