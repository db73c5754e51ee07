"""What a function or `forward` does to the tensors it is given, seen from a call site.

A summary says which tensor parameters the body writes in place (and where), which it leaves
saved for backward, and which the result aliases. Call sites apply it, so that seed-2's two
patterns — a callee rewriting a tensor its caller still needs, and a caller rewriting a tensor
its callee saved — are found across functions, classes and files.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .values import SaveRecord, Site


@dataclass(frozen=True)
class ParamWrite:
    index: int
    site: Site
    form: object  # model.Form of the write inside the callee
    action: str
    via_activation: bool  # done by an inplace=True activation: the caller's call is TIP004
    grad_enabled: bool  # the callee's own grad mode there: under its no_grad a leaf may be written


@dataclass
class Summary:
    params: tuple[str, ...]
    writes: list[ParamWrite] = field(default_factory=list)
    saves: dict[int, set[SaveRecord]] = field(default_factory=dict)
    returns: set[int] = field(default_factory=set)
    result_saves: set[SaveRecord] = field(default_factory=set)  # the callee saved what it returns
    # `return a, b, x`: which parameters each element of a returned tuple aliases
    item_returns: tuple[frozenset[int], ...] | None = None

    @property
    def is_empty(self) -> bool:
        return not (self.writes or self.saves or self.returns or self.result_saves)


EMPTY = Summary(params=())


class SummaryRecorder:
    """Collects a summary while the interpreter runs a body with symbolic parameters."""

    def __init__(self, params: dict[str, frozenset[int]]) -> None:
        self.names = tuple(params)
        self.by_storage = {storage: index for index, storages in enumerate(params.values()) for storage in storages}
        self.summary = Summary(params=self.names)
        self.returned: frozenset[int] = frozenset()

    def params_of(self, storages: frozenset[int]) -> set[int]:
        return {self.by_storage[storage] for storage in storages if storage in self.by_storage}

    def on_write(self, storages: frozenset[int], site: Site, form: object, action: str, via_activation: bool, grad_enabled: bool) -> None:
        for index in sorted(self.params_of(storages)):
            write = ParamWrite(index, site, form, action, via_activation, grad_enabled)
            if write not in self.summary.writes:
                self.summary.writes.append(write)

    def on_return(self, storages: frozenset[int], items: tuple[frozenset[int], ...] | None) -> None:
        if items is not None and self.summary.item_returns is None and not self.summary.returns:
            self.summary.item_returns = tuple(frozenset(self.params_of(item)) for item in items)
        else:
            self.summary.returns |= self.params_of(storages)
        self.returned |= storages

    def on_saves(self, saves: dict[int, frozenset[SaveRecord]]) -> None:
        for storage, records in saves.items():
            index = self.by_storage.get(storage)
            if index is not None:
                self.summary.saves.setdefault(index, set()).update(records)
            elif storage in self.returned:
                self.summary.result_saves.update(records)
