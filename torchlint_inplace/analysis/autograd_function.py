"""The contract of a custom `torch.autograd.Function.forward` with the tensors it is given.

`forward` runs with grad mode off, but its writes still bump the inputs' version counters and
change the caller's tensors. Autograd must be told with `ctx.mark_dirty(x)` (and `x` must be
returned); a tensor marked dirty must really be written and returned; and a tensor handed to
`ctx.save_for_backward` must not be written afterwards, or backward reads the new values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

import libcst as cst

from .hazards import RAISES_AT_BACKWARD
from .model import Form, Mutation, Reason
from .state import Site, State
from .values import Val, Value

if TYPE_CHECKING:
    from .project import FileContext


@dataclass(slots=True)
class _Write:
    site: Site
    storages: frozenset[int]
    action: str
    written: str
    saved_before: cst.CSTNode | None  # the save_for_backward call that saved it earlier


@dataclass(slots=True)
class FunctionContract:
    ctx: FileContext
    inputs: dict[str, frozenset[int]]
    writes: list[_Write] = field(default_factory=list)
    dirty: list[tuple[cst.CSTNode, str, frozenset[int]]] = field(default_factory=list)
    saved: dict[int, cst.CSTNode] = field(default_factory=dict)  # storage -> save_for_backward call
    returns: list[tuple[cst.CSTNode, frozenset[int]]] = field(default_factory=list)

    def on_return(self, node: cst.CSTNode, storages: frozenset[int]) -> None:
        self.returns.append((node, storages))

    def _line(self, node: cst.CSTNode) -> int:
        return self.ctx.span_of(node).start.line

    def input_storages(self) -> frozenset[int]:
        return frozenset().union(*self.inputs.values()) if self.inputs else frozenset()

    def on_write(self, storages: frozenset[int], site: Site, action: str, written: str, state: State) -> None:
        saved_before = next((self.saved[s] for s in storages if s in self.saved), None)
        self.writes.append(_Write(site, storages, action, written, saved_before))

    def on_ctx_call(self, method: str, call: cst.Call, args: list[Value], state: State) -> None:
        for arg, value in zip(call.args, args, strict=False):
            if not (isinstance(value, Val) and value.is_tensor):
                continue
            if method == "save_for_backward":
                for storage in value.storages:
                    self.saved.setdefault(storage, call)
            elif method == "mark_dirty":
                self.dirty.append((call, self.ctx.code_of(arg.value), value.storages))

    def mutations(self) -> list[Mutation]:
        found = []
        dirty = frozenset().union(*(storages for _, _, storages in self.dirty)) if self.dirty else frozenset()
        returned = frozenset().union(*(storages for _, storages in self.returns)) if self.returns else frozenset()
        inputs = self.input_storages()
        for write in self.writes:
            if write.saved_before is not None:
                kind = "saved-then-written"
                line = self.ctx.span_of(write.saved_before).start.line
                reason = Reason(
                    f"`ctx.save_for_backward` at line {line} saved it, so backward() reads the modified values (wrong gradients, or an error)",
                    "silently changes the saved values backward() reads",
                    help="save a `.clone()`, or save the output instead of the input",
                )
            elif write.storages & inputs and not write.storages & dirty:
                kind = "unmarked-write"
                returning = next((node for node, storages in self.returns if storages & write.storages), None)
                where = (
                    f"returns it at line {self._line(returning)}"
                    if returning is not None
                    else f"(line {self._line(write.site.node)}) keeps it"
                )
                reason = Reason(
                    f"`forward` {where} without `ctx.mark_dirty({write.written})`: the caller's tensor changes behind autograd's back, and backward() will raise '…modified by an inplace operation' if anything saved it",
                    RAISES_AT_BACKWARD,
                    help=f"call `ctx.mark_dirty({write.written})` and return it, or write into `{write.written}.clone()`",
                )
            else:
                continue
            found.append(self._mutation(write.site.node, f"{write.action} `{write.written}` in place", reason, kind))
        written = frozenset().union(*(write.storages for write in self.writes)) if self.writes else frozenset()
        for call, text, storages in self.dirty:
            if not storages & written or not storages & returned:
                missing = (
                    "neither written nor returned"
                    if not storages & (written | returned)
                    else ("not written" if not storages & written else "not returned")
                )
                kind = {
                    "neither written nor returned": "dirty-neither",
                    "not written": "dirty-not-written",
                    "not returned": "dirty-not-returned",
                }[missing]
                ends = ", ".join(f"line {self._line(node)}" for node, _ in self.returns) or "nowhere"
                reason = Reason(
                    f"`{text}` is {missing} by `forward` (it returns at {ends}); autograd's view of it is now wrong (torch raises at once when a dirty tensor is not returned)",
                    "raises now" if not storages & returned else "wrong gradient bookkeeping",
                    help="only mark tensors `forward` writes in place and returns",
                )
                found.append(self._mutation(call, f"`ctx.mark_dirty({text})` marks a tensor", reason, kind))
        return found

    def _mutation(self, node: cst.CSTNode, action: str, reason: Reason, kind: str) -> Mutation:
        """Breaches of the contract are always reported, so their words are built at once."""
        return Mutation(
            form=Form.AUTOGRAD_FUNCTION,
            node=node,
            action=action,
            locate=partial(self.ctx.span_of, node),
            explain=lambda: reason,
            kind=kind,
            path=self.ctx.path,
        )
