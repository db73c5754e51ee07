"""Project classes and functions as the syntax declares them: names, bases, methods.

What a class's instances hold (submodules, parameters, buffers) is not read here: it is what
interpreting its `__init__` with the arguments of the site that builds it produces
(`instances.py`), so that `act_layer(**params)`, `getattr(nn, name)()` and lists grown in loops
give the same facts as a literal `nn.ReLU(inplace=True)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from .syntax import descendants, is_self

AUTOGRAD_FUNCTION_BASES = frozenset({"torch.autograd.Function", "torch.autograd.function.Function"})


@dataclass(eq=False, slots=True)
class ClassInfo:
    """A class defined in a project file. Compared by identity: it is its own reference."""

    name: str
    bases: tuple[str, ...]  # each base's canonical torch name, or its dotted name as written
    node: cst.ClassDef
    path: str
    methods: dict[str, cst.FunctionDef] = field(default_factory=dict)
    # A dataclass's fields that its generated `__init__` stores as passed (`dataclass_init`):
    # each instance holds the caller's own values there, not the memoised instance's.
    fields: tuple[str, ...] = ()
    # What `assigned_on_self` found: asked once per method analysed, a walk of the whole class.
    _on_self: frozenset[str] | None = field(default=None, init=False, repr=False)

    @property
    def is_autograd_function(self) -> bool:
        return bool(AUTOGRAD_FUNCTION_BASES.intersection(self.bases))

    def torch_bases(self) -> list[str]:
        return [base for base in self.bases if base.startswith("torch.nn.")]

    def assigned_on_self(self) -> frozenset[str]:
        """The attributes the class's own methods assign on `self` (`self.rpn_conv = ...`)."""
        if self._on_self is None:
            self._on_self = frozenset(
                target.attr.value
                for node in descendants(self.node.body)
                if isinstance(node, cst.Assign)
                for target in (assign.target for assign in node.targets)
                if isinstance(target, cst.Attribute) and is_self(target.value)
            )
        return self._on_self


@dataclass(frozen=True, slots=True)
class FunctionRef:
    """A function defined in a project file (a method: with the class that defines it)."""

    path: str
    node: cst.FunctionDef
    cls: ClassInfo | None = None

    @property
    def name(self) -> str:
        return self.node.name.value

    @property
    def is_static(self) -> bool:
        return any(_decorator_name(d) == "staticmethod" for d in self.node.decorators)

    @property
    def is_classmethod(self) -> bool:
        return any(_decorator_name(d) == "classmethod" for d in self.node.decorators)


def _decorator_name(decorator: cst.Decorator) -> str | None:
    target = decorator.decorator
    return target.value if isinstance(target, cst.Name) else None
