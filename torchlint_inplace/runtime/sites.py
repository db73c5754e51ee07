"""Where in the user's code something happened: the first frame outside torch and this package.

A saved tensor or an in-place write is reported at the user's line, never at `torch/nn/...` or
at the tracer's own hooks. The outermost torch frame on the way there is kept as `via`: it says
*how* the user's line reached the op (an `inplace=True` module, an optimizer's `step()`), which a
line of source text alone does not show.
"""

from __future__ import annotations

import linecache
import os
import sys
from dataclasses import dataclass
from types import CodeType

import torch

_INTERNAL_ROOTS = (
    os.path.dirname(torch.__file__) + os.sep,
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
)
# The torch packages whose code, called from a user's line, does the write on its behalf; other
# torch frames on the stack (dispatch, hooks, decorators) say nothing about the line's form.
_CALLED_PACKAGES = ("nn/", "optim/")
_internal_codes: dict[CodeType, bool] = {}


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


def _is_internal(code: CodeType) -> bool:
    internal = _internal_codes.get(code)
    if internal is None:
        internal = _internal_codes[code] = code.co_filename.startswith(_INTERNAL_ROOTS)
    return internal


def user_site() -> Site | None:
    """The innermost frame of the caller's stack that belongs to neither torch nor this package."""
    frame = sys._getframe(1)
    via = None
    while frame is not None:
        code = frame.f_code
        if not _is_internal(code):
            parameters = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
            return Site(code.co_filename, frame.f_lineno, code.co_qualname, parameters, via)
        if code.co_filename.startswith(_INTERNAL_ROOTS[0]):
            module = code.co_filename[len(_INTERNAL_ROOTS[0]) :].replace(os.sep, "/")
            via = module if module.startswith(_CALLED_PACKAGES) else via
        frame = frame.f_back
    return None


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
