"""Tensors an object keeps, written in place by a callee of one of its methods, and read again
from the object later: the `state-read-again` report.

A dataset keeps its images as `self.data`; `__getitem__` hands `self.data[index]` to a transform
that normalises it in place (`t.sub_(m).div_(s)`) and returns it. Nothing of the call reads the
image again, so no caller watch sees anything; the next epoch's `__getitem__`, another frame of
the same object, reads `self.data[index]` again and gets the normalised values, which it
normalises once more. So when a holder (see callers.py) is a method whose `self.<attribute>`
holds the written tensor, and the callee was meant to write (it returns or reads what it wrote),
the object is watched past the call: once the method has returned, an op reading the written
elements through `<object>.<attribute>`, in any frame whose running expression spells that
attribute of that same object, is the later read.

The written elements are kept as byte ranges of the storage, merged, so a later read of another
item (`self.data[index + 1]`) is no read of what was written; a view op's elements are those of
the view it returns (the tracer hands those over). An object is held weakly: a watch ends with
its object, or when the attribute no longer holds the storage.
"""

from __future__ import annotations

import ast
import bisect
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType

import torch

from .memory import byte_span, overlaps, storage_key
from .report import Related, SilentReport, TensorInfo, tensor_info
from .sites import Site, frame_site, is_internal
from .statements import evaluate, instruction_span, node_at, statement_at

# Attributes of an object looked through for the written tensor, and byte ranges kept per watch
# (beyond it further writes are not watched: a miss, never a false report).
_MAX_ATTRIBUTES = 256
_MAX_SPANS = 4096
_PREFIX = "self."


def kept_aliases(frame: FrameType, target: torch.Tensor) -> set[str]:
    """`self.<attribute>` for each tensor attribute of a method's `self` that shares `target`'s
    elements (a tensor kept in a `dict` or a module's registered buffers is not looked into)."""
    code = frame.f_code
    if code.co_argcount < 1 or code.co_varnames[0] != "self":
        return set()
    attributes = getattr(frame.f_locals.get("self"), "__dict__", None)
    if not isinstance(attributes, dict) or len(attributes) > _MAX_ATTRIBUTES:
        return set()
    return {
        _PREFIX + name
        for name, value in attributes.items()
        if isinstance(value, torch.Tensor) and overlaps(value, target)
    }


@dataclass
class _Kept:
    """An object whose `attributes` hold elements (`spans`) a callee of its method wrote."""

    owner: weakref.ref[object]
    attributes: frozenset[str]
    holder: FrameType | None  # the method's frame until it returns: its own reads are its caller watch's
    handed: Site  # the method's line that handed the tensor on
    write: Site
    built: Related | None
    callee: str
    rule: str
    tensor: TensorInfo
    spans: list[tuple[int, int]] = field(default_factory=list)  # sorted, disjoint, merged

    def add_span(self, span: tuple[int, int]) -> None:
        low, high = span
        start = bisect.bisect_left(self.spans, low, key=_end)  # the first range ending at or after `low`
        end = start
        while end < len(self.spans) and self.spans[end][0] <= high:
            low, high = min(low, self.spans[end][0]), max(high, self.spans[end][1])
            end += 1
        if end == start and len(self.spans) >= _MAX_SPANS:
            return
        self.spans[start:end] = [(low, high)]

    def covers(self, span: tuple[int, int]) -> bool:
        """Whether a byte range meets one that was written."""
        low, high = span
        before = bisect.bisect_left(self.spans, high, key=_start)  # the ranges starting before `high`
        return low < high and before > 0 and self.spans[before - 1][1] > low


def _start(span: tuple[int, int]) -> int:
    return span[0]


def _end(span: tuple[int, int]) -> int:
    return span[1]


class KeptWatches:
    """Objects keeping a written tensor, by storage; `add` receives the reports."""

    def __init__(self, add: Callable[[SilentReport], None]) -> None:
        self._add_report = add
        self._watches: dict[int, dict[tuple[int, Site], _Kept]] = {}

    @property
    def waiting(self) -> bool:
        return bool(self._watches)

    def forget(self) -> None:
        self._watches.clear()

    def keep(
        self,
        key: int,
        holder: FrameType,
        stale: frozenset[str],
        target: torch.Tensor,
        write: Site,
        built: Related | None,
        callee: str,
        rule: str,
    ) -> None:
        """Watches the holder's `self` when a stale name of the write is one of its attributes."""
        attributes = frozenset(alias.removeprefix(_PREFIX) for alias in stale if alias.startswith(_PREFIX))
        owner = holder.f_locals.get("self") if attributes else None
        if owner is None:
            return
        try:
            reference = weakref.ref(owner)
        except TypeError:  # an object without weak references (`__slots__`) is not watched
            return
        self._sweep()
        watches = self._watches.setdefault(key, {})
        known = watches.get((id(owner), write))
        handed = frame_site(holder)
        if known is None or known.owner() is not owner:
            known = watches[(id(owner), write)] = _Kept(
                reference, attributes, holder, handed, write, built, callee, rule, tensor_info(target)
            )
        known.holder, known.handed = holder, handed
        known.add_span(byte_span(target))

    def _sweep(self) -> None:
        """Drops the watches of objects gone, or no longer holding the storage."""
        for key, watches in list(self._watches.items()):
            for index, watch in list(watches.items()):
                owner = watch.owner()
                if owner is None or not any(
                    storage_key(value) == key for value in _attributes(owner, watch.attributes)
                ):
                    del watches[index]
            if not watches:
                del self._watches[key]

    def on_read(self, key: int, tensor: torch.Tensor, frames: list[FrameType]) -> None:
        """An op reads `tensor` (of storage `key`); `frames` is the stack, innermost first."""
        watches = self._watches.get(key)
        if not watches:
            return
        for index, watch in list(watches.items()):
            if self._read(watch, tensor, frames):
                del watches[index]
        if not watches:
            del self._watches[key]

    def _read(self, watch: _Kept, tensor: torch.Tensor, frames: list[FrameType]) -> bool:
        """Whether the watch is done: reported, or its object gone."""
        owner = watch.owner()
        if owner is None:
            return True
        if watch.holder is not None:
            if any(frame is watch.holder for frame in frames):
                return False  # the method that handed the tensor on is still running
            watch.holder = None
        if not watch.covers(byte_span(tensor)):
            return False  # other elements of what the object keeps
        reader = next((frame for frame in frames if not is_internal(frame)), None)
        if reader is None:
            return False
        statement = statement_at(reader.f_code.co_filename, reader.f_lineno)
        node = node_at(statement, instruction_span(reader.f_code, reader.f_lasti)) if statement is not None else None
        for element in ast.walk(node) if node is not None else ():
            if not (
                isinstance(element, ast.Attribute)
                and isinstance(element.ctx, ast.Load)
                and element.attr in watch.attributes
            ):
                continue
            try:
                holds = evaluate(element.value, reader.f_locals, reader.f_globals) is owner
            except LookupError:
                continue
            value = getattr(owner, element.attr, None)
            if holds and isinstance(value, torch.Tensor) and overlaps(value, tensor):
                self._report(watch, owner, ast.unparse(element), element.attr, frame_site(reader))
                return True
        return False

    def _report(self, watch: _Kept, owner: object, text: str, attribute: str, read: Site) -> None:
        kind = type(owner).__name__
        summary = (
            f"{watch.callee} wrote in place at line {watch.write.line} a tensor that `{kind}` keeps as `self.{attribute}` "
            f"(`{watch.handed.function}` handed it on at line {watch.handed.line}), and `{read.function}` reads `{text}` "
            f"again at line {read.line}: that read, and every later one, sees the written values"
        )
        fix = f"clone in the callee before writing (`x = x.clone()`), or hand on a copy of what `{kind}` keeps (`.clone()`)"
        related = (Related(f"`self.{attribute}` handed on", watch.handed), Related(f"`{text}` read again", read))
        self._add_report(
            SilentReport(
                "state-read-again",
                summary,
                watch.write,
                related,
                watch.rule,
                fix,
                watch.tensor,
                f"self.{attribute}",
                watch.built,
            )
        )


def _attributes(owner: object, names: frozenset[str]) -> list[torch.Tensor]:
    values = (getattr(owner, name, None) for name in names)
    return [value for value in values if isinstance(value, torch.Tensor)]
