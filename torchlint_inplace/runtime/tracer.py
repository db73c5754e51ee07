"""The culprit tracer: who saved each tensor for backward, and who wrote over it since.

Two PyTorch hooks cooperate. Saved-tensor hooks see every tensor an op saves for backward (pack)
and every time backward reads one (unpack); with them installed autograd skips its own
version check, so unpack does it, and raises with the full story when the version moved. A
`TorchDispatchMode` sees every aten op below autograd; the ops whose schema marks an argument as
written (`Tensor(a!)`) are the in-place writes, matched to saved tensors by storage, since views
share their base's storage and version counter.

A saved tensor is tracked only while autograd holds it: the pack hook's record is owned by the
graph, so a graph freed by backward() (or by going out of scope) drops its records, and a write
to a buffer that only a finished graph had saved is no hazard. A graph kept by
`retain_graph=True` stays pending: it was kept to be backpropagated again (the GAN bug).

Writes autograd does not see (through `.data`, whose version counter is its own) raise nothing
at backward; unpack reports them as silent corruption instead, and `silent.py` watches every
write for the other silent shapes. The errors autograd raises at the write itself happen above
the dispatcher, out of the hooks' sight: leaving the traced block, `refusals.py` explains them
from the traceback, with the line that made a multi-output view, which the dispatch mode notes.
"""

from __future__ import annotations

import contextlib
import sys
import weakref
from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any

import torch
from torch._ops import OpOverload
from torch.utils._python_dispatch import TorchDispatchMode

from .construction import built_at, recording_builds, writing_module
from .memory import overlaps, shares_version_counter, storage_key
from .refusals import InplaceRefusalError, explain
from .report import InplaceCulpritError, Related, SavedEvent, SilentReport, WriteEvent, tensor_info, write_event
from .silent import SilentWatch, written_name
from .sites import Site, frame_site, outward, user_frame, user_site

_DETACH = torch.ops.aten.detach.default
# Ops returning several views of one tensor, which autograd refuses to let be written in place.
_MULTI_VIEW_OPS = frozenset(
    getattr(torch.ops.aten, name) for name in ("split", "split_with_sizes", "unbind", "chunk", "tensor_split")
)
# Ops that read only their tensor arguments' metadata (shape, dtype, device): `torch.zeros_like(x)`,
# `x.new_empty(...)` see no values a write changed, as the static analysis holds too.
_METADATA_READERS = frozenset(
    getattr(torch.ops.aten, name)
    for name in (
        "empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like", "randint_like",
        "new_empty", "new_zeros", "new_ones", "new_full", "new_empty_strided",
    )
)  # fmt: skip

# Dropping index entries whose records all died costs a pass over the index; do it this often.
_SWEEP_EVERY = 4096
# An aten op as the dispatch mode receives it, and its arguments by (position, name).
Op = OpOverload[..., Any]
Arguments = tuple[tuple[int, str], ...]
# Schema facts of each op (the arguments it writes, those it reads), shared by every tracer.
_write_args: dict[Op, Arguments] = {}
_read_args: dict[Op, Arguments] = {}
_views: dict[Op, bool] = {}


class _Saved:
    """What the pack hook hands autograd: the saved tensor (detached, so no reference cycle
    through its grad_fn; the alias shares storage and version counter) and its history."""

    __slots__ = ("alias", "version", "op", "site", "writes", "hidden", "in_graph", "__weakref__")

    def __init__(self, alias: torch.Tensor, version: int, site: Site | None, in_graph: bool) -> None:
        self.alias = alias
        self.in_graph = in_graph  # the tensor saved required grad
        self.version = version
        self.op = "?"
        self.site = site
        self.writes: list[WriteEvent] = []
        self.hidden: list[WriteEvent] = []  # writes through an alias with its own version counter (`.data`)

    def event(self) -> SavedEvent:
        return SavedEvent(self.op, self.version, self.site)


def _op_of_node(name: str) -> str:
    """`MulBackward0` -> `mul`: the forward op an autograd node differentiates."""
    base = name.split("Backward", 1)[0]
    return "".join("_" + c.lower() if c.isupper() else c for c in base).lstrip("_") or name


class _WriteWatch(TorchDispatchMode):
    """Logs in-place writes to saved storages; in fail-fast mode refuses them. Also names the op
    that saved each tensor: inputs are saved just before their op reaches dispatch, results just
    after, so a pending record belongs to the next op unless it is a result of the last one."""

    def __init__(self, tracer: Tracer) -> None:
        # A direct call: mypy exempts unannotated torch code (untyped_calls_exclude) there, not through super().
        TorchDispatchMode.__init__(self)
        self.tracer = tracer
        self.last_op = "?"
        self.last_outputs: Sequence[object] = ()
        self.pending: list[_Saved] = []

    def __torch_dispatch__(
        self, func: Op, types: Sequence[type], args: Sequence[object] = (), kwargs: Mapping[str, object] | None = None
    ) -> object:
        kwargs = kwargs or {}
        if func is _DETACH:  # the pack hook's own detach; a user's saves nothing either
            return func(*args, **kwargs)
        name = func._opname.lstrip("_")
        if self.pending:
            for record in self.pending:
                record.op = name
            self.pending.clear()
        tracer = self.tracer
        written = tracer.written_arguments(func)
        waiting = tracer.silent.waiting
        viewing = waiting and not written and tracer.is_view(func)  # what a view reads is what it returns
        if written or (waiting and not viewing):
            read = list(_values(args, kwargs, tracer.read_arguments(func)))
            if waiting:
                tracer.silent.on_read(read, sys._getframe(1))
            if written:
                tracer.on_write(name, list(_values(args, kwargs, written)), read)
        out = func(*args, **kwargs)
        self.last_op = name
        self.last_outputs = out if isinstance(out, (tuple, list)) else (out,)
        if viewing:
            tracer.silent.on_read(
                [item for item in self.last_outputs if isinstance(item, torch.Tensor)], sys._getframe(1)
            )
        if func.overloadpacket in _MULTI_VIEW_OPS:
            tracer.views_made(self.last_outputs)
        return out


def _values(args: Sequence[object], kwargs: Mapping[str, object], arguments: Arguments) -> Iterator[torch.Tensor]:
    for index, name in arguments:
        value = args[index] if index < len(args) else kwargs.get(name)
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, (list, tuple)):
            yield from (item for item in value if isinstance(item, torch.Tensor))


class Tracer(contextlib.ContextDecorator):
    """`with trace():` / `@trace()`: explains (or, with fail_fast, prevents) the in-place error,
    and collects the silent corruption it sees in `reports`."""

    def __init__(self, fail_fast: bool = False) -> None:
        self.fail_fast = fail_fast
        self.silent = SilentWatch()
        self._entered: list[tuple[contextlib.ExitStack, _WriteWatch | None]] = []
        self._index: dict[int, weakref.WeakSet[_Saved]] = {}
        self._views: dict[int, tuple[weakref.ref[torch.Tensor], Site]] = {}
        self._packs = 0
        self._watch: _WriteWatch | None = None

    @property
    def reports(self) -> list[SilentReport]:
        """The silent corruption seen so far, in the order first seen."""
        return list(self.silent.reports.values())

    def __enter__(self) -> Tracer:
        stack = contextlib.ExitStack()
        self._entered.append((stack, self._watch))
        stack.enter_context(recording_builds())
        self._watch = stack.enter_context(_WriteWatch(self))
        stack.enter_context(torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        __tracebackhide__ = True  # pytest shows the user's frames, not this one
        stack, self._watch = self._entered.pop()
        stack.__exit__(exc_type, exc, tb)
        if not self._entered:
            self.silent.forget()
        if isinstance(exc, RuntimeError) and not isinstance(exc, (InplaceCulpritError, InplaceRefusalError)):
            explained = explain(exc, self._view_site)
            if explained is not None:
                raise explained.with_traceback(tb) from None

    # --- schema facts -------------------------------------------------------------------

    @staticmethod
    def written_arguments(func: Op) -> Arguments:
        written = _write_args.get(func)
        if written is None:
            written = _write_args[func] = tuple(
                (index, argument.name)
                for index, argument in enumerate(func._schema.arguments)
                if argument.alias_info is not None and argument.alias_info.is_write
            )
        return written

    @staticmethod
    def is_view(func: Op) -> bool:
        """Whether the op returns a view of an argument (`select`, `view`, `transpose`, ...)."""
        view = _views.get(func)
        if view is None:
            view = _views[func] = any(
                result.alias_info is not None and not result.alias_info.is_write for result in func._schema.returns
            )
        return view

    @staticmethod
    def read_arguments(func: Op) -> Arguments:
        """The tensor arguments an op only reads (not those it writes)."""
        read = _read_args.get(func)
        if read is None:
            written = {index for index, _ in Tracer.written_arguments(func)}
            read = _read_args[func] = tuple(
                (index, argument.name)
                for index, argument in enumerate(func._schema.arguments)
                if index not in written
                and "Tensor" in str(argument.type)
                and func.overloadpacket not in _METADATA_READERS
            )
        return read

    # --- saved-tensor hooks ---------------------------------------------------------------

    def _pack(self, tensor: torch.Tensor) -> _Saved:
        record = _Saved(tensor.detach(), tensor._version, user_site(), tensor.requires_grad)
        watch = self._watch
        if watch is not None and _is_saved_result(tensor, watch.last_outputs):
            record.op = watch.last_op
        elif watch is not None:
            watch.pending.append(record)
        key = storage_key(tensor)
        if key is not None:
            self._index.setdefault(key, weakref.WeakSet()).add(record)
        self._packs += 1
        if self._packs % _SWEEP_EVERY == 0:
            self._index = {key: records for key, records in self._index.items() if records}
            self._views = {key: view for key, view in self._views.items() if view[0]() is not None}
        return record

    def _unpack(self, record: _Saved) -> torch.Tensor:
        node = torch._C._current_autograd_node()
        if node is not None:
            record.op = _op_of_node(node.name())
        version = record.alias._version
        if version != record.version:
            raise InplaceCulpritError(
                tensor_info(record.alias), record.event(), tuple(record.writes), version, at_write=False
            )
        report = _hidden_write(record) if record.hidden else None
        if report is not None:
            self.silent.add(report)
        return record.alias

    # --- writes ---------------------------------------------------------------------------

    def on_write(self, op: str, targets: list[torch.Tensor], operands: list[torch.Tensor]) -> None:
        self.silent.on_write(op, targets, operands, sys._getframe(2))
        for target in targets:
            key = storage_key(target)
            records = self._index.get(key) if key is not None else None
            if not records:
                continue
            found = user_frame(sys._getframe(1))
            site = frame_site(*found) if found is not None else None
            local = found[0].f_locals if found is not None else {}
            built = (
                built_at(writing_module(outward(sys._getframe(1))))
                if site is not None and (site.via or "").startswith("nn/")
                else None
            )
            grad = torch.is_grad_enabled()
            for record in list(records):
                # the user's own write through an alias out of the graph (`.detach()`); torch's code
                # detaching on the user's behalf (`max_norm`) keeps the form of the user's line
                detached = (
                    grad and record.in_graph and not target.requires_grad and site is not None and site.via is None
                )
                write = write_event(op, target._version + 1, site, record.event(), built, local, detached)
                if not shares_version_counter(target, record.alias):
                    if overlaps(target, record.alias):
                        record.hidden.append(write)
                    continue
                record.writes.append(write)
                if self.fail_fast:
                    raise InplaceCulpritError(
                        tensor_info(record.alias), record.event(), tuple(record.writes), target._version, at_write=True
                    )

    # --- views ----------------------------------------------------------------------------

    def views_made(self, outputs: Sequence[object]) -> None:
        site = user_site()
        if site is not None:
            for out in outputs:
                if isinstance(out, torch.Tensor):
                    self._views[id(out)] = (weakref.ref(out), site)

    def _view_site(self, tensor: torch.Tensor) -> Site | None:
        known = self._views.get(id(tensor))
        return known[1] if known is not None and known[0]() is tensor else None


def _hidden_write(record: _Saved) -> SilentReport | None:
    """The report of the last hidden write made from user code (a report needs its line)."""
    write = next((write for write in reversed(record.hidden) if write.site is not None), None)
    if write is None or write.site is None:
        return None
    return SilentReport(
        "hidden-write",
        f"`{write.op}` wrote a tensor that `{record.op}` saved for backward through an alias autograd does not track (`.data`): "
        "backward used the written values, and the gradient is wrong",
        write.site,
        (Related(f"saved for backward by `{record.op}`", record.site),) if record.site else (),
        "TIP008",
        "write out of place, or keep the write out of the graph's lifetime (after backward, or before the op that saves the tensor)",
        tensor_info(record.alias),
        written_name(write.site),
    )


def _is_saved_result(tensor: torch.Tensor, outputs: Sequence[object]) -> bool:
    """Whether `tensor` is being saved as a result of the op that just ran (sigmoid, softmax,
    exp, ... save their output), rather than as an input of the op about to run."""
    node = tensor.grad_fn
    return node is not None and any(tensor is out for out in outputs) and _saves_result(type(node))


_saves_result_cache: dict[type, bool] = {}


def _saves_result(node_type: type) -> bool:
    saves = _saves_result_cache.get(node_type)
    if saves is None:
        saves = _saves_result_cache[node_type] = any(name.startswith("_saved_result") for name in dir(node_type))
    return saves


def trace(fail_fast: bool = False) -> Tracer:
    """Run a block (or, as a decorator, a function) under the culprit tracer.

    On a version-counter error at backward, raises `InplaceCulpritError` (a RuntimeError) naming
    the line that saved the tensor and every line that modified it since. With `fail_fast`, the
    in-place write itself raises, before it runs, at the mutating line.
    """
    return Tracer(fail_fast=fail_fast)
