"""Where in the user's code something happened: the first frame outside torch, this package and
the standard library (runpy, contextlib and functools frames run no code of the user's).

A saved tensor or an in-place write is reported at the user's line, never at `torch/nn/...` or
at the tracer's own hooks. The outermost torch frame on the way there is kept as `via`: it says
*how* the user's line reached the op (an `inplace=True` module, an optimizer's `step()`), which a
line of source text alone does not show.
"""

from __future__ import annotations

import linecache
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from types import CodeType, FrameType

import torch

_INTERNAL_ROOTS = (
    os.path.dirname(torch.__file__) + os.sep,
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
)
# The standard library runs no user code of its own (runpy, contextlib's decorator frames,
# functools wrappers), but on some installs it holds site-packages, which is user code.
_STDLIB = os.path.dirname(os.__file__) + os.sep
_PACKAGE_FOLDERS = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)
# The torch packages whose code, called from a user's line, does the write on its behalf; other
# torch frames on the stack (dispatch, hooks, decorators) say nothing about the line's form.
_CALLED_PACKAGES = ("nn/", "optim/")
_internal_codes: dict[CodeType, bool] = {}
_called_modules: dict[CodeType, str | None] = {}


@dataclass(frozen=True)
class Site:
    """A line of user code, and the torch module (if any) through which it did what it did."""

    file: str
    line: int
    function: str  # qualified name, e.g. `Block.forward`
    parameters: tuple[str, ...]  # the enclosing function's parameter names (TIP005/TIP007)
    via: str | None  # the torch.nn / torch.optim module the line called into, e.g. "optim/sgd.py"

    @property
    def code(self) -> str:
        return linecache.getline(self.file, self.line).strip()

    @property
    def location(self) -> str:
        return f"{_display_path(self.file)}:{self.line}"

    def to_dict(self) -> dict[str, object]:
        return {"file": _display_path(self.file), "line": self.line, "function": self.function, "code": self.code}


def _is_internal(code: CodeType) -> bool:
    internal = _internal_codes.get(code)
    if internal is None:
        file = code.co_filename
        in_stdlib = file.startswith(_STDLIB) and not any(folder in file for folder in _PACKAGE_FOLDERS)
        # A pytest hook implementation (`pytest_runtest_call` of pytest, pluggy or any plugin's
        # hookwrapper) is test machinery around the user's test, never the user's line.
        hook = code.co_name.startswith("pytest_")
        internal = _internal_codes[code] = (
            file.startswith(_INTERNAL_ROOTS) or in_stdlib or file.startswith("<frozen ") or hook
        )
    return internal


def user_site() -> Site | None:
    """The innermost user frame of the caller's stack."""
    found = user_frame(sys._getframe(1))
    return None if found is None else frame_site(*found)


def user_frame(frame: FrameType | None) -> tuple[FrameType, str | None] | None:
    """From `frame` outwards, the first user frame and the torch.nn / torch.optim module through
    which it reached `frame` (its `via`)."""
    via = None
    while frame is not None:
        code = frame.f_code
        if not _is_internal(code):
            return frame, via
        via = called_module(frame) or via
        frame = frame.f_back
    return None


def called_module(frame: FrameType) -> str | None:
    """`nn/modules/activation.py` for a frame of torch.nn or torch.optim code, else None."""
    code = frame.f_code
    if code in _called_modules:
        return _called_modules[code]
    file, module = code.co_filename, None
    if file.startswith(_INTERNAL_ROOTS[0]):
        module = file[len(_INTERNAL_ROOTS[0]) :].replace(os.sep, "/")
        module = module if module.startswith(_CALLED_PACKAGES) else None
    _called_modules[code] = module
    return module


def user_frames(frame: FrameType | None) -> Iterator[FrameType]:
    """Every user frame from `frame` outwards (the callers of a user function, torch's frames
    between them skipped)."""
    return (frame for frame in outward(frame) if not _is_internal(frame.f_code))


def outward(frame: FrameType | None) -> Iterator[FrameType]:
    """`frame` and its callers, innermost first."""
    while frame is not None:
        yield frame
        frame = frame.f_back


def is_internal(frame: FrameType) -> bool:
    return _is_internal(frame.f_code)


def frame_site(frame: FrameType, via: str | None = None, line: int | None = None) -> Site:
    """The frame's current line, or `line` (a traceback's line for a frame that has moved on)."""
    code = frame.f_code
    parameters = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    return Site(code.co_filename, line or frame.f_lineno, code.co_qualname, parameters, via)


def _display_path(file: str) -> str:
    """Relative to the working directory when inside it, as compilers print paths."""
    try:
        relative = os.path.relpath(file)
    except ValueError:  # another drive on Windows
        return file
    return file if relative.startswith(os.pardir) else relative


def code_frame(site: Site, context: int = 2) -> list[str]:
    """The site's line with `context` lines before it, numbered, the site's line marked `>`."""
    first = max(1, site.line - context)
    numbers = range(first, site.line + 1)
    width = len(str(site.line))
    rows = []
    for number in numbers:
        text = linecache.getline(site.file, number).rstrip()
        marker = ">" if number == site.line else " "
        rows.append(f"  {marker} {number:>{width}} | {text}")
    return rows
