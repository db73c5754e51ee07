"""Callers that read again a tensor their callee wrote in place: the `caller-reads-written` report.

At every in-place write the frames that may hold the written tensor under a name are the
*holders*: the user frame that called an in-place torch module or functional (`out =
self.act(h)`: the module is the callee), and up to `_CALLERS` user frames above a user function
that wrote. A holder's *stale* names are those bound to the tensor (a name, a constant dict key
`batch["obs"]`, or a container holding it) that the running statement does not rebind. The holder
is then watched: the first op of the holder's own code that reads the tensor through a stale
name is the caller's later read, the report's second line.

Whether the callee was *meant* to write is decided as a reader of the code would: a call made as
a statement (`fill_mask(mask)`) is made for its effect, so the names it passes are no stale
names; a callee that neither returns the tensor nor reads it after writing it filled an
out-parameter, so no read of the caller's is stale; a helper named `scale_` says it writes.

Watches hold their frames (a returned frame's id is soon another call's), and last while the
holder is on the stack. The call that wrote is over when the frame it called (the holder's
*child* at the write) is off the stack: so a loop calling again from the same line (the next
layer reading the mask the previous one flipped) is a later read too. A holder that returns a
stale name (`return x`) reads it too, for whoever it returns to: the returned frame keeps its
last instruction and its variables, so the `return` is read from it when the watch is dropped.

A method's `self.<attribute>` holding the tensor is a stale name as well; the object outlives the
call, so its later readers are watched by `kept.py` once the method has returned.
"""

from __future__ import annotations

import ast
import dis
import itertools
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import FrameType

import torch

from .kept import KeptWatches, kept_aliases
from .memory import overlaps, storage_key
from .report import Related, SilentReport, TensorInfo, tensor_info
from .sites import Site, frame_site, outward, user_frames
from .statements import (
    Span,
    Variables,
    aliases_in,
    bound_targets,
    evaluate,
    evaluate_alias,
    function_at,
    instruction_span,
    node_at,
    statement_at,
    target_text,
)

# Torch code that writes its caller's tensors by design: optimizers, nn.init, grad clipping.
BY_DESIGN = ("optim/", "nn/init.py", "nn/utils/")
# How many user frames above a writing function are watched (a layer, its block, the model).
_CALLERS = 3
_MAX_CONTAINER_ITEMS = 64


@dataclass
class _Watch:
    """A holder whose stale names hold a tensor a callee wrote; waiting for it to read one."""

    holder: FrameType
    child: FrameType | None  # the frame the holder called: while it runs, the writing call is not over
    lasti: int  # the holder's instruction during the write: the call itself
    call: Span | None  # its position: in its own statement, only names after it are later reads
    statement: int  # the call's statement (its first line)
    stale: frozenset[str]
    bound: frozenset[str]  # what the call's statement binds: the callee's result, when it returns the tensor
    write: Site
    built: Related | None
    callee: str  # how the summary names what wrote (`the in-place ReLU`, `Clip.forward`)
    rule: str
    tensor: TensorInfo
    target: torch.Tensor  # what the callee wrote (the holder's frame holds its storage anyway)
    writer: FrameType | None  # the callee, whose later reads of the tensor vouch for the report
    vouched: bool


class CallerWatches:
    """Registers holders at writes (`watch`), and hands `add` a report when one reads again."""

    def __init__(self, add: Callable[[SilentReport], None]) -> None:
        self._add_report = add
        self._watches: dict[int, list[_Watch]] = {}
        self.kept = KeptWatches(add)

    @property
    def waiting(self) -> bool:
        return bool(self._watches) or self.kept.waiting

    def forget(self) -> None:
        """Drops the waiting watches (and the frames they hold): tracing ended. A holder that has
        returned meanwhile may have returned a stale name: that is read first."""
        live = {id(frame) for frame in user_frames(sys._getframe(1))}
        for watches in self._watches.values():
            for watch in watches:
                if id(watch.holder) not in live:
                    self._returned(watch)
        self._watches.clear()
        self.kept.forget()

    # --- at a write -----------------------------------------------------------------------

    def watch(
        self,
        op: str,
        target: torch.Tensor,
        frame: FrameType,
        via: str | None,
        site: Site,
        start: FrameType,
        module: torch.nn.Module | None,
        built: Related | None,
    ) -> None:
        """Remembers the holders of `target`: the user frame `frame` wrote it (through the torch
        code `via`, the torch `module` whose build line is `built`)."""
        if via is not None and (via.startswith(BY_DESIGN) or not via.startswith(("nn/modules/", "nn/functional"))):
            return
        name = frame.f_code.co_name
        by_name = name.endswith("_") and not name.endswith("__")  # `normalize_(x)` says it writes
        callee = (
            f"the in-place `{type(module).__name__ if module is not None else op}`"
            if via is not None
            else f"`{site.function}`"
        )
        rule = "TIP004" if via is not None else "TIP005" if frame.f_code.co_varnames[:1] == ("ctx",) else "TIP007"
        key = storage_key(target)
        for holder, child, direct in self._holders(frame, via, start, by_name):
            held = _aliases(holder.f_locals, target) | kept_aliases(holder, target)
            statement = statement_at(holder.f_code.co_filename, holder.f_lineno) if held else None
            if statement is None:
                continue
            call = instruction_span(holder.f_code, holder.f_lasti)
            bound = bound_targets(statement)
            stale = held - bound
            call_node = node_at(statement, call)
            for_effect = (
                isinstance(statement.node, ast.Expr) and statement.header is None and call_node is statement.node.value
            )
            if for_effect:  # a call made for its effect: its arguments are meant to see it, other aliases are not
                stale -= aliases_in(call_node)
            if not stale:
                continue
            vouched = direct or for_effect or via is not None or _returns_written(frame, target)
            watch = _Watch(
                holder,
                child,
                holder.f_lasti,
                call,
                statement.first_line,
                frozenset(stale),
                bound,
                site,
                built,
                callee,
                rule,
                tensor_info(target),
                target,
                None if vouched else frame,
                vouched,
            )
            self._add(key, watch, start)
            if vouched and key is not None:
                self.kept.keep(key, watch.holder, watch.stale, target, site, built, callee, rule)

    @staticmethod
    def _holders(
        frame: FrameType, via: str | None, start: FrameType, by_name: bool
    ) -> list[tuple[FrameType, FrameType | None, bool]]:
        """(holder, the frame it called, whether the write was a torch module's on its behalf)."""
        child_of: dict[int, FrameType] = {}
        previous = None
        for current in outward(start):
            if previous is not None:
                child_of[id(current)] = previous
            previous = current
        holders = [(frame, child_of.get(id(frame)), True)] if via is not None else []
        if not by_name:
            callers = list(itertools.islice(user_frames(frame.f_back), _CALLERS))
            holders += [(caller, child_of.get(id(caller)), False) for caller in callers]
        return holders

    def _add(self, key: int | None, watch: _Watch, start: FrameType) -> None:
        """Adds the watch, dropping those whose holder has returned (no longer on the stack),
        after reading their `return`."""
        live = {id(frame) for frame in user_frames(start)}
        watches_by_key: dict[int, list[_Watch]] = {}
        for known_key, watches in self._watches.items():
            for known in watches:
                if id(known.holder) not in live:
                    self._returned(known)
                elif (known.holder, known.write) != (watch.holder, watch.write):
                    watches_by_key.setdefault(known_key, []).append(known)
        self._watches = watches_by_key
        if key is not None:
            self._watches.setdefault(key, []).append(watch)

    # --- at a read ------------------------------------------------------------------------

    def on_read(self, tensors: Iterable[torch.Tensor], start: FrameType) -> None:
        frames: list[FrameType] | None = None
        for tensor in tensors:
            key = storage_key(tensor)
            if key is None:
                continue
            if self.kept.waiting:
                frames = frames if frames is not None else list(outward(start))
                self.kept.on_read(key, tensor, frames)
            watches = self._watches.get(key)
            if not watches:
                continue
            if frames is None:
                frames = list(outward(start))
            for watch in list(watches):
                if self._read(watch, tensor, frames):
                    watches.remove(watch)
            if not watches:
                del self._watches[key]

    def _read(self, watch: _Watch, tensor: torch.Tensor, frames: list[FrameType]) -> bool:
        """Whether the watch is done: reported, or its holder gone or not concerned."""
        holder = watch.holder
        if not any(frame is holder for frame in frames):
            self._returned(watch)
            return True  # the holder returned: it reads nothing any more
        # still inside the call that wrote
        if watch.child is not None and any(frame is watch.child for frame in frames):
            if not watch.vouched and any(frame is watch.writer for frame in frames):
                watch.vouched = True  # the callee reads what it wrote: it wrote it for its own use
            return False
        if not (watch.vouched or _returned_written(watch)):
            return True  # the callee only wrote it: the caller asked for the result
        statement = statement_at(holder.f_code.co_filename, holder.f_lineno)
        node = node_at(statement, instruction_span(holder.f_code, holder.f_lasti)) if statement is not None else None
        if statement is None or node is None:
            return False
        again = holder.f_lasti == watch.lasti  # the same call made anew (a loop): its arguments are later reads
        after = watch.call if statement.first_line == watch.statement and not again else None
        for alias in sorted(aliases_in(node, after) & watch.stale):
            try:
                value = evaluate_alias(alias, holder.f_locals)
            except LookupError:
                continue
            if _holds(value, tensor):
                self._report_read(watch, alias, frame_site(holder))
                return True
        return False

    def _returned(self, watch: _Watch) -> None:
        """The holder is off the stack. When it returned a stale name of the tensor (`return x`),
        that `return` is its later read: whoever it returns to gets the written values."""
        holder = watch.holder
        code = holder.f_code
        if dis.opname[code.co_code[holder.f_lasti]] != "RETURN_VALUE":
            return  # raised, or a generator suspended at a `yield`
        if not (watch.vouched or _returned_written(watch)):
            return
        statement = statement_at(code.co_filename, holder.f_lineno)
        if statement is None or not isinstance(statement.node, ast.Return) or statement.node.value is None:
            return
        after = watch.call if statement.first_line == watch.statement else None  # `return f(x), x`: the second `x`
        for returned in _returned_parts(statement.node.value):
            if not aliases_in(returned, after) & watch.stale:
                continue
            try:
                value = evaluate(returned, holder.f_locals, holder.f_globals)
            except LookupError:
                continue  # a call or an operator: an op, whose read of the tensor on_read has seen
            if _holds(value, watch.target):
                self._report_read(watch, ast.unparse(returned), frame_site(holder), returned=True)
                return

    def _report_read(self, watch: _Watch, alias: str, read: Site, returned: bool = False) -> None:
        reads = f"returns `{alias}` at line {read.line}" if returned else f"reads `{alias}` again at line {read.line}"
        sees = "whoever it returns to gets" if returned else "that read sees"
        if watch.rule == "TIP004":
            summary = (
                f"{watch.callee} at line {watch.write.line} rewrote `{alias}` in place, and `{read.function}` {reads}: "
                f"{sees} the rewritten values, not the ones `{alias}` held"
            )
            fix = f"pass `inplace=False` where the module is built, or keep a copy for the later read (`{alias}.clone()` before the call)"
        else:
            reads = (
                f"returns the same tensor as `{alias}` at line {read.line}"
                if returned
                else f"reads the same tensor as `{alias}` again at line {read.line}"
            )
            summary = (
                f"{watch.callee} wrote its argument in place at line {watch.write.line}, and its caller `{read.function}` {reads}: "
                f"{sees} the written values"
            )
            fix = "clone the argument in the callee before writing it (`x = x.clone()`), or pass the callee a copy"
        related = (Related(f"`{alias}` {'returned' if returned else 'read again'}", read),)
        self._add_report(
            SilentReport(
                "caller-reads-written", summary, watch.write, related, watch.rule, fix, watch.tensor, alias, watch.built
            )
        )


def _holds(value: object, tensor: torch.Tensor) -> bool:
    """Whether the value is, or (one level down) contains, a tensor sharing `tensor`'s elements."""
    if isinstance(value, torch.Tensor):
        return overlaps(value, tensor)
    if isinstance(value, dict) and len(value) <= _MAX_CONTAINER_ITEMS:
        value = list(value.values())
    if isinstance(value, (list, tuple)) and len(value) <= _MAX_CONTAINER_ITEMS:
        return any(isinstance(item, torch.Tensor) and overlaps(item, tensor) for item in value)
    return False


def _aliases(local: Variables, target: torch.Tensor) -> set[str]:
    """The aliases in a frame of a tensor sharing `target`'s elements: a name, a dict's constant
    key (`batch['obs']`), or the name of a dict, list or tuple holding it under another key."""
    found = set()
    for name, value in local.items():
        if isinstance(value, torch.Tensor):
            if overlaps(value, target):
                found.add(name)
        elif isinstance(value, dict) and len(value) <= _MAX_CONTAINER_ITEMS:
            for key, item in value.items():
                if isinstance(item, torch.Tensor) and overlaps(item, target):
                    found.add(f"{name}[{key!r}]" if isinstance(key, (str, int)) else name)
        elif _holds(value, target):
            found.add(name)
    return found


def _returned_parts(value: ast.expr) -> list[ast.expr]:
    """What a `return` hands back: the elements of a tuple, list or dict display, else the value."""
    if isinstance(value, (ast.Tuple, ast.List)):
        return list(value.elts)
    if isinstance(value, ast.Dict):
        return list(value.values)
    return [value]


def _returned_written(watch: _Watch) -> bool:
    """Whether the callee returned what it wrote: a name the call's statement binds holds it
    (`y = helper(x)` where the helper ends `return act(x, inplace=True)`)."""
    for name in watch.bound:
        try:
            value = evaluate_alias(name, watch.holder.f_locals)
        except LookupError:
            continue
        if _holds(value, watch.target):
            return True
    return False


def _returns_written(frame: FrameType, target: torch.Tensor) -> bool:
    """Whether the callee's `return` gives back what it wrote: a name holding it, or an in-place
    call on one (`return x.clamp_(...)`)."""
    node = function_at(frame.f_code.co_filename, frame.f_code.co_firstlineno)
    holding = _aliases(frame.f_locals, target)
    for statement in ast.walk(node) if node is not None else ():
        if isinstance(statement, ast.Return) and statement.value is not None:
            value = statement.value
            if target_text(value) in holding:
                return True
            if (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Attribute)
                and target_text(value.func.value) in holding
            ):
                return value.func.attr.endswith("_")
    return False
