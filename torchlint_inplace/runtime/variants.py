"""Run-time stand-ins for a fix, for findings that carry none (child side of `--confirm`).

`confirmed: changes results` compares a run of the code as written with a run of the same
module with the finding's fix applied. Where the finding has a fix, that is the fixer's own
edit (`fixed.py`). Where it has none — TIP008 never has one (a hidden write's intent is
unknowable), a TIP004 activation built outside `__init__` or a TIP007 write the fixer cannot
place may not — the fix's effect is imitated at run time, on the finding's line alone, so the
file is never rewritten and other lines keep their in-place behaviour:

- TIP004: the inplace activation or dropout called from the line, or built at it, runs with `inplace=False`
  (every `nn.ReLU`-family module and `F.*(inplace=...)` functional goes through
  `torch.nn.functional`, so the functional is intercepted when its caller is that line);
- TIP007: the function containing the line gets copies of its tensor arguments, so the
  caller's tensors are untouched (what the `.clone()` the fix inserts does);
- TIP008: what autograd saved is kept apart from writes made at the line (it unpacks a copy
  taken at save time), which is what an out-of-place write leaves to backward.

The comparison itself (`results_differ`) serves both.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from .construction import built_at, writing_module
from .fixed import rebindings, replaced
from .sites import outward, user_site

if TYPE_CHECKING:
    from .tracer import Op

# What each stand-in does, for the status that names it.
VARIANTS = {
    "TIP004": "run with `inplace=False` at this line",
    "TIP007": "run with copies of the function's tensor arguments",
    "TIP008": "run with what autograd saved kept apart from this line's write",
}
# Two runs that agree up to float noise from a different op order agree.
RTOL, ATOL = 1e-4, 1e-5


def _called_from(file: str, line: int) -> bool:
    """The functional runs for `line`: called from it, or by a module built there (TIP004 reports
    an in-place module at its build)."""
    site = user_site()
    if site is not None and site.file == file and site.line == line:
        return True
    built = built_at(writing_module(outward(sys._getframe(1))))
    return built is not None and built.site.file == file and built.site.line == line


def _inplace_functionals() -> dict[str, tuple[Callable[..., Any], inspect.Signature]]:
    found: dict[str, tuple[Callable[..., Any], inspect.Signature]] = {}
    for name in dir(F):
        function = getattr(F, name)
        if not inspect.isfunction(function):
            continue
        try:
            signature = inspect.signature(function)
        except (TypeError, ValueError):
            continue
        if "inplace" in signature.parameters:
            found[name] = (function, signature)
    return found


def _out_of_place_from(
    file: str, line: int, function: Callable[..., Any], signature: inspect.Signature
) -> Callable[..., Any]:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _called_from(file, line):
            bound = signature.bind(*args, **kwargs)
            bound.arguments["inplace"] = False
            return function(*bound.args, **bound.kwargs)
        return function(*args, **kwargs)

    return wrapper


def _tip004(file: str, line: int) -> list[tuple[object, str, object]]:
    functionals = _inplace_functionals()
    wrappers = {
        name: _out_of_place_from(file, line, function, signature) for name, (function, signature) in functionals.items()
    }
    replacements: list[tuple[object, str, object]] = [(F, name, wrapper) for name, wrapper in wrappers.items()]
    return replacements + rebindings(
        {id(functionals[name][0]): wrapper for name, wrapper in wrappers.items()}, skip=(F,)
    )


def _enclosing_function(file: str, line: int) -> list[str] | None:
    """Qualified name parts of the innermost class-level or module-level function holding `line`."""
    with open(file, encoding="utf-8") as source:
        tree = ast.parse(source.read())

    def search(body: list[ast.stmt], prefix: list[str]) -> list[str] | None:
        for node in body:
            if not (node.lineno <= line <= (node.end_lineno or node.lineno)):
                continue
            if isinstance(node, ast.ClassDef):
                return search(node.body, [*prefix, node.name])
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return [*prefix, node.name]
        return None

    return search(tree.body, [])


def _clone(value: object) -> object:
    return value.clone() if isinstance(value, torch.Tensor) else value


def _with_copied_arguments(function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return function(*map(_clone, args), **{key: _clone(value) for key, value in kwargs.items()})

    return wrapper


def _tip007(module: ModuleType, file: str, line: int) -> list[tuple[object, str, object]]:
    parts = _enclosing_function(file, line)
    if not parts:
        return []
    holder: object = module
    for part in parts[:-1]:
        holder = getattr(holder, part, None)
        if not isinstance(holder, type):
            return []
    raw = vars(holder).get(parts[-1])
    if isinstance(raw, (staticmethod, classmethod)):
        replacement: object = type(raw)(_with_copied_arguments(raw.__func__))
    elif inspect.isfunction(raw):
        replacement = _with_copied_arguments(raw)
    else:
        return []
    replacements = [(holder, parts[-1], replacement)]
    if holder is module:
        replacements += rebindings({id(raw): replacement}, skip=(module,))
    return replacements


class _WritesAtLine(TorchDispatchMode):
    """Collects the storages that in-place ops issued from one source line write to."""

    def __init__(self, file: str, line: int) -> None:
        # A direct call: mypy exempts unannotated torch code (untyped_calls_exclude) there, not through super().
        TorchDispatchMode.__init__(self)
        self.file, self.line = file, line
        self.storages: set[int] = set()

    def __torch_dispatch__(
        self, func: Op, types: Sequence[type], args: Sequence[object] = (), kwargs: Mapping[str, object] | None = None
    ) -> object:
        kwargs = kwargs or {}
        if func._schema.is_mutable and _called_from(self.file, self.line):
            for index, argument in enumerate(func._schema.arguments):
                value = args[index] if index < len(args) else kwargs.get(argument.name)
                if argument.alias_info is not None and argument.alias_info.is_write and isinstance(value, torch.Tensor):
                    self.storages.add(value.untyped_storage()._cdata)
        return func(*args, **kwargs)


@contextlib.contextmanager
def _saved_apart_from_line(file: str, line: int) -> Iterator[None]:
    watch = _WritesAtLine(file, line)

    def pack(tensor: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return tensor, tensor.detach().clone()

    def unpack(packed: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        tensor, copy = packed
        return copy if tensor.untyped_storage()._cdata in watch.storages else tensor

    with watch, torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        yield


@contextlib.contextmanager
def variant_applied(code: str, module: ModuleType, file: str, line: int) -> Iterator[bool]:
    """Runs the block with the run-time stand-in for the fix of the finding `code` at
    `file:line`; yields False when there is none here (the block then runs the code as written)."""
    if code == "TIP008":
        with _saved_apart_from_line(file, line):
            yield True
        return
    replacements = _tip004(file, line) if code == "TIP004" else _tip007(module, file, line) if code == "TIP007" else []
    with replaced(replacements):
        yield bool(replacements)


def tensors(value: object) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from tensors(item)


def results_differ(first: Sequence[torch.Tensor | None], second: Sequence[torch.Tensor | None]) -> bool:
    """Whether two runs' outputs and gradients (in the same order) tell a different story."""
    if len(first) != len(second):
        return True
    for a, b in zip(first, second, strict=True):
        if a is None or b is None:
            if (a is None) != (b is None):
                return True
            continue
        if a.shape != b.shape or a.dtype != b.dtype:
            return True
        if a.is_floating_point() or a.is_complex():
            if not torch.allclose(a, b, rtol=RTOL, atol=ATOL, equal_nan=True):
                return True
        elif not torch.equal(a, b):
            return True
    return False


def flat_tensors(value: object) -> list[torch.Tensor]:
    return [tensor.detach().clone() for tensor in tensors(value)]
