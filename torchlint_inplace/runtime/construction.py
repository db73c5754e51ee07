"""Where each torch module was built, so a write by `nn.ReLU(inplace=True)` names the line to edit.

The static linter reports an in-place module at the line that built it (`self.act =
nn.ReLU(inplace=True)`), the culprit a user edits, with the call as a related line; the tracer
sees the write in the module's `forward`, called from the user's call line. While a tracer is
active, `nn.Module.__init__` is wrapped to remember the user line that built each torch module
(modules built before tracing began, or copied, have none). The instance is found on the stack at
the write: the innermost module frame whose module has `inplace` set (the ReLU inside a
Sequential, not the Sequential).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from types import FrameType

import torch

from .sites import Site, user_site

_built: weakref.WeakKeyDictionary[torch.nn.Module, Site] = weakref.WeakKeyDictionary()
_lock = threading.Lock()
_active = 0
_original_init = torch.nn.Module.__init__


def _recording_init(self: torch.nn.Module, *args, **kwargs) -> None:
    _original_init(self, *args, **kwargs)
    if type(self).__module__.startswith("torch.nn.") and self not in _built:
        site = user_site()
        if site is not None:
            _built[self] = site


class recording_builds:
    """While any is entered, torch modules built remember their user line. Nests (the pytest
    plugin's tracer around a test's own `with trace():`)."""

    def __enter__(self) -> recording_builds:
        global _active
        with _lock:
            _active += 1
            if _active == 1:
                torch.nn.Module.__init__ = _recording_init
        return self

    def __exit__(self, *exc_info) -> None:
        global _active
        with _lock:
            _active -= 1
            if _active == 0:
                torch.nn.Module.__init__ = _original_init


def inplace_module(frames: Iterable[FrameType]) -> torch.nn.Module | None:
    """The first module, innermost frame first, that runs `forward` with `inplace` set."""
    for frame in frames:
        module = frame.f_locals.get("self") if frame.f_code.co_name == "forward" else None
        if isinstance(module, torch.nn.Module) and getattr(module, "inplace", False) is True:
            return module
    return None


def built_at(module: torch.nn.Module | None) -> Site | None:
    return _built.get(module) if module is not None else None
