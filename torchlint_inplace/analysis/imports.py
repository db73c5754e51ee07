"""Resolves local names to the dotted torch names they stand for.

`import torch as th`, `from torch import nn`, `import torch.nn.functional as F` and
`from torch import no_grad` all just rename things; the analysis reasons about
`torch.nn.functional.relu`, never about whatever the file called it.
"""

from __future__ import annotations

import libcst as cst

# The many public spellings of one thing, folded to the one the tables use.
_CANONICAL_PREFIXES = (
    ("torch.nn.modules.", "torch.nn."),
    ("torch.autograd.grad_mode.", "torch."),
    ("torch.autograd.function.", "torch.autograd."),
    ("torch.nn.parameter.", "torch.nn."),
)


def dotted(expr: cst.BaseExpression) -> str | None:
    """`a.b.c` as a string, or None for anything that is not a plain attribute chain."""
    parts = []
    # `type(...) is`: LibCST's node classes are ABCs, whose isinstance is a Python-level call,
    # and this runs for every name and attribute evaluated.
    while type(expr) is cst.Attribute:  # a loop, not recursion: chains can be thousands long
        parts.append(expr.attr.value)
        expr = expr.value
    if type(expr) is not cst.Name:
        return None
    parts.append(expr.value)
    return ".".join(reversed(parts))


def is_torch(qualname: str) -> bool:
    """Whether a dotted name is torch's own: `torchaudio`, `torchvision` and `torchgeo` are other
    packages, and a project's own files where it holds them (linting torchaudio itself)."""
    return qualname == "torch" or qualname.startswith("torch.")


def _module_name(node: cst.BaseExpression) -> str:
    return dotted(node) or ""


def _bound_name(asname: cst.AsName) -> str:
    """The name `import a as b` binds: the parser gives an import's alias only as a name."""
    name = asname.name
    assert isinstance(name, cst.Name)  # `AsName` is shared with `with ... as (a, b)`; imports bind names
    return name.value


def bound_name(alias: cst.ImportAlias) -> str:
    """The name an import binds: `b` of `import a as b` and `from m import a as b`, `a` of
    `import a.b` and `from m import a`."""
    if alias.asname is not None:
        return _bound_name(alias.asname)
    return _module_name(alias.name).split(".")[0]


class Imports:
    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}
        # `from .layers import Clip`: local name -> (level, module, imported name)
        self.relative: dict[str, tuple[int, str, str]] = {}
        # `from GNN import *`, `from .layers import *`: (level, module), in order
        self.stars: list[tuple[int, str]] = []

    def add(self, node: cst.Import | cst.ImportFrom) -> None:
        if isinstance(node, cst.Import):
            for alias in node.names:
                local = bound_name(alias)
                self.aliases[local] = _module_name(alias.name) if alias.asname is not None else local
            return
        base = _module_name(node.module) if node.module is not None else ""
        if isinstance(node.names, cst.ImportStar):
            self.stars.append((len(node.relative), base))
            return
        if node.relative:
            for alias in node.names:
                self.relative[bound_name(alias)] = (len(node.relative), base, _module_name(alias.name))
            return
        for alias in node.names:
            self.aliases[bound_name(alias)] = f"{base}.{_module_name(alias.name)}"

    def qualname(self, expr: cst.BaseExpression) -> str | None:
        """The canonical dotted name `expr` refers to, if it starts from an imported name."""
        text = dotted(expr)
        if text is None:
            return None
        head, _, rest = text.partition(".")
        target = self.aliases.get(head)
        if target is None:
            return None
        full = f"{target}.{rest}" if rest else target
        for prefix, replacement in _CANONICAL_PREFIXES:
            if full.startswith(prefix):
                # torch.nn.modules.activation.ReLU -> torch.nn.ReLU
                tail = full[len(prefix) :]
                full = replacement + (tail.rsplit(".", 1)[-1] if prefix == "torch.nn.modules." else tail)
        return full
