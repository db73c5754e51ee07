"""Where each torch module was built, so a write by `nn.ReLU(inplace=True)` names the line to edit.

The static linter reports an in-place module at the line that built it (`self.act =
nn.ReLU(inplace=True)`), the culprit a user edits, with the call as a related line; the tracer
sees the write in the module's `forward`, called from the user's call line. While a tracer is
active, `nn.Module.__init__` is wrapped to remember the user line that built each torch module,
and `nn.Module.__setattr__` the line that made one in place afterwards (`m.inplace = True` over
`self.modules()`); modules built before tracing began, or copied, have neither. The module is
found on the stack at the write: the innermost torch module running `forward` (the ReLU inside a
Sequential, not the Sequential; an Embedding renormalising its weight for `max_norm`).
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any, TypeGuard, cast

import torch

from .report import Related
from .sites import Site, user_site

# module -> (how: "built" or "set", the user line)
_lines: weakref.WeakKeyDictionary[torch.nn.Module, tuple[str, Site]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()
_active = 0
_original_init = torch.nn.Module.__init__
# Typed for torch's attributes (a tensor or a module), it stores any value (`inplace`, a flag).
_original_setattr = cast(Callable[[torch.nn.Module, str, object], None], torch.nn.Module.__setattr__)


def _is_torch_module(module: object) -> TypeGuard[torch.nn.Module]:
    return isinstance(module, torch.nn.Module) and type(module).__module__.startswith("torch.nn.")


def _recording_init(self: torch.nn.Module, *args: Any, **kwargs: Any) -> None:
    _original_init(self, *args, **kwargs)
    if _is_torch_module(self) and self not in _lines and (site := user_site()) is not None:
        _lines[self] = ("built", site)


def _recording_setattr(self: torch.nn.Module, name: str, value: object) -> None:
    _original_setattr(self, name, value)
    if name == "inplace" and value is True and _is_torch_module(self):
        setter = sys._getframe(1)
        if setter.f_code.co_name == "__init__" and setter.f_locals.get("self") is self:
            return  # the module's own constructor storing its argument: that is the build
        if (site := user_site()) is not None:
            _lines[self] = ("set", site)


class recording_builds:
    """While any is entered, torch modules built (or made in place) remember their user line.
    Nests (the pytest plugin's tracer around a test's own `with trace():`)."""

    def __enter__(self) -> recording_builds:
        global _active
        with _lock:
            _active += 1
            if _active == 1:
                _patch(_recording_init, _recording_setattr)
        return self

    def __exit__(self, *exc_info: object) -> None:
        global _active
        with _lock:
            _active -= 1
            if _active == 0:
                _patch(_original_init, _original_setattr)


def _patch(init: Callable[..., None], setattr_: Callable[[torch.nn.Module, str, object], None]) -> None:
    """Installs `nn.Module.__init__` and `__setattr__` (the recording ones, or torch's own back)."""
    for name, method in (("__init__", init), ("__setattr__", setattr_)):
        setattr(torch.nn.Module, name, method)


def writing_module(frames: Iterable[FrameType]) -> torch.nn.Module | None:
    """The first torch module, innermost frame first, running `forward`: the one whose code wrote."""
    for frame in frames:
        module = frame.f_locals.get("self") if frame.f_code.co_name == "forward" else None
        if _is_torch_module(module):
            return module
    return None


def built_at(module: torch.nn.Module | None) -> Related | None:
    """The line that built the module, or that set `inplace = True` on it later, as a related line."""
    known = _lines.get(module) if module is not None else None
    if known is None:
        return None
    how, site = known
    kind = type(module).__name__
    if how == "set":
        return Related(f"`inplace = True` was set on the `{kind}`", site)
    return Related(f"the {'in-place ' if getattr(module, 'inplace', False) is True else ''}`{kind}` was built", site)
