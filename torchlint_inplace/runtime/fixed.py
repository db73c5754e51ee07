"""The file with one finding's fix applied, imported beside the original (child side of `--confirm`).

`confirmed: changes results` means the module's outputs or gradients differ from the same
module with the finding's fix applied. The fix is the fixer's own: the finding's `Fix` edits,
applied to the file's text exactly as `--fix --unsafe-fixes` would write them for that one
finding (`fixes.apply.apply_edits`), compiled under the file's own name and executed as a
second module object with the original's package, so relative imports resolve as they do for
the original. Nothing is written to disk.

A driver defined in another file (a caller of the fixed class) is built while every loaded
user module's global bound to something the original module defines is rebound to the
copy's twin (`standing_in`): `from .layers import Block` then builds the fixed `Block`.

This module imports neither torch nor user code by itself: the parent process uses
`fix_to_json` to send a finding's fix to the child, which rebuilds it with `fix_from_json`.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import inspect
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict
from types import ModuleType
from typing import Any

from ..diagnostics import Applicability, Edit, Fix, Position, Span
from ..fixes.apply import apply_edits, compiles
from ..source import NotReadable, read

COPY_SUFFIX = "__torchlint_fixed"


def fix_to_json(fix: Fix) -> dict[str, Any]:
    return asdict(fix)


def fix_from_json(data: dict[str, Any]) -> Fix:
    def span(value: dict[str, Any]) -> Span:
        return Span(Position(**value["start"]), Position(**value["end"]))

    edits = tuple(Edit(span(edit["span"]), edit["content"]) for edit in data["edits"])
    return Fix(data["description"], edits, Applicability(data["applicability"]))


def fixed_copy(original: ModuleType, fix: Fix) -> ModuleType | None:
    """A second module object executing `original`'s file with `fix` applied; None when the
    file cannot be read again or the fixed text does not compile (the fixer would refuse it).
    Exceptions raised by the module's own code propagate."""
    path = original.__file__
    if path is None:
        return None
    try:
        text = apply_edits(read(path).text, fix.edits)
    except NotReadable:
        return None
    if not compiles(text, path):
        return None
    name = original.__name__ + COPY_SUFFIX
    copy = importlib.util.module_from_spec(importlib.machinery.ModuleSpec(name, None, origin=path, is_package=False))
    copy.__file__ = path
    copy.__package__ = original.__package__  # relative imports resolve against the original's package
    sys.modules[name] = copy  # dataclasses, typing and pickle look classes' modules up here
    exec(compile(text, path, "exec", dont_inherit=True), copy.__dict__)
    return copy


def defined_in(module: ModuleType) -> dict[str, object]:
    """The module's own classes and functions, by name (not what it imported)."""
    return {
        name: value
        for name, value in vars(module).items()
        if (isinstance(value, type) or inspect.isfunction(value)) and value.__module__ == module.__name__
    }


def rebindings(twins: Mapping[int, object], skip: Sequence[ModuleType] = ()) -> list[tuple[ModuleType, str, object]]:
    """For every loaded module global (outside torch and `skip`) bound to an object whose id is
    a key of `twins`, that global and its twin: `from torch.nn.functional import relu` and
    `from .layers import Block` bind names a replacement of the defining attribute would miss."""
    torch = sys.modules.get("torch")
    torch_root = os.path.dirname(torch.__file__) + os.sep if torch is not None and torch.__file__ else None
    found = []
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None) or ""
        if not path or (torch_root and path.startswith(torch_root)) or any(module is other for other in skip):
            continue
        for name, bound in list(vars(module).items()):
            if id(bound) in twins:
                found.append((module, name, twins[id(bound)]))
    return found


@contextlib.contextmanager
def replaced(replacements: Sequence[tuple[object, str, object]]) -> Iterator[None]:
    """Sets attributes (or module globals) for the block, then puts the originals back."""
    originals = [
        (holder, name, holder.__dict__[name] if isinstance(holder, type) else getattr(holder, name))
        for holder, name, _ in replacements
    ]
    try:
        for holder, name, value in replacements:
            setattr(holder, name, value)
        yield
    finally:
        for holder, name, value in reversed(originals):
            setattr(holder, name, value)


@contextlib.contextmanager
def standing_in(original: ModuleType, copy: ModuleType) -> Iterator[None]:
    """Other modules see the copy's classes and functions (and the copy itself) where they
    had bound the original's, for the block."""
    twins: dict[int, object] = {id(original): copy}
    twins.update((id(value), vars(copy)[name]) for name, value in defined_in(original).items() if name in vars(copy))
    with replaced(rebindings(twins, skip=(original, copy))):
        yield
