"""What a class's `__init__` says about its attributes: submodules, parameters, buffers.

`self.act = nn.ReLU(inplace=True)` in `__init__` is what makes `self.act(x)` in `forward`
an in-place write to `x`; `self.w = nn.Parameter(...)` is what makes `self.w` a leaf that
requires grad. Only constructor calls are read; nothing is executed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst

from ..diagnostics import Span
from .imports import Imports
from .torch_facts import torch_facts
from .values import ModuleRef

AUTOGRAD_FUNCTION_BASES = frozenset({"torch.autograd.Function", "torch.autograd.function.Function"})
_CONTAINERS = frozenset({"Sequential", "ModuleList"})


@dataclass
class ClassInfo:
    name: str
    bases: tuple[str, ...]
    modules: dict[str, ModuleRef] = field(default_factory=dict)
    parameters: dict[str, Span] = field(default_factory=dict)
    buffers: dict[str, Span] = field(default_factory=dict)

    @property
    def is_autograd_function(self) -> bool:
        return bool(AUTOGRAD_FUNCTION_BASES.intersection(self.bases))


def _literal_bool(expr: cst.BaseExpression, defaults: dict[str, bool]) -> bool | None:
    if isinstance(expr, cst.Name):
        if expr.value in ("True", "False"):
            return expr.value == "True"
        return defaults.get(expr.value)
    return None


def _init_bool_defaults(init: cst.FunctionDef) -> dict[str, bool]:
    """`def __init__(self, inplace=True)`: what `inplace=inplace` means when nobody passes it."""
    found = {}
    for param in (*init.params.params, *init.params.kwonly_params):
        if param.default is not None:
            value = _literal_bool(param.default, {})
            if value is not None:
                found[param.name.value] = value
    return found


class ClassReader:
    def __init__(self, imports: Imports, span_of: Callable[[cst.CSTNode], Span]) -> None:
        self.imports = imports
        self.span_of = span_of

    def read(self, node: cst.ClassDef) -> ClassInfo:
        bases = tuple(self.imports.qualname(arg.value) or "" for arg in node.bases)
        info = ClassInfo(node.name.value, bases)
        for statement in node.body.body:
            if isinstance(statement, cst.FunctionDef) and statement.name.value == "__init__":
                self._read_init(statement, info)
        return info

    def _read_init(self, init: cst.FunctionDef, info: ClassInfo) -> None:
        defaults = _init_bool_defaults(init)
        reader = self

        class Assignments(cst.CSTVisitor):
            def visit_Assign(self, node: cst.Assign) -> None:
                for target in node.targets:
                    name = _self_attribute(target.target)
                    if name is not None:
                        reader._read_assignment(name, node.value, info, defaults)

            def visit_Call(self, node: cst.Call) -> None:
                # self.register_buffer("name", tensor) / self.register_parameter("name", p)
                func = node.func
                if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
                    if func.attr.value in ("register_buffer", "register_parameter") and node.args:
                        first = node.args[0].value
                        if isinstance(first, cst.SimpleString):
                            table = info.buffers if func.attr.value == "register_buffer" else info.parameters
                            table[first.evaluated_value] = reader.span_of(node)

            def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
                return node is init  # nested helpers are not the constructor

        init.visit(Assignments())

    def _read_assignment(self, name: str, value: cst.BaseExpression, info: ClassInfo, defaults: dict[str, bool]) -> None:
        if not isinstance(value, cst.Call):
            return
        qualname = self.imports.qualname(value.func) or ""
        if qualname == "torch.nn.Parameter":
            info.parameters[name] = self.span_of(value)
            return
        module = self.module_ref(value, defaults)
        if module is not None:
            info.modules[name] = module

    def module_ref(self, call: cst.Call, defaults: dict[str, bool]) -> ModuleRef | None:
        qualname = self.imports.qualname(call.func)
        span = self.span_of(call)
        if qualname is None or not qualname.startswith("torch.nn."):
            # A project class: CamelCase constructor calls are taken to be modules.
            name = qualname or (call.func.attr.value if isinstance(call.func, cst.Attribute) else getattr(call.func, "value", ""))
            short = name.rsplit(".", 1)[-1] if isinstance(name, str) else ""
            return ModuleRef(kind=None, origin=span) if short[:1].isupper() else None
        kind = qualname[len("torch.nn."):]
        if kind in _CONTAINERS:
            return ModuleRef(kind=kind, items=self._container_items(call, defaults), origin=span)
        return ModuleRef(kind=kind, inplace=self._inplace(kind, call, defaults), origin=span)

    def _container_items(self, call: cst.Call, defaults: dict[str, bool]) -> tuple[ModuleRef, ...]:
        elements: list[cst.BaseExpression] = []
        for arg in call.args:
            if isinstance(arg.value, (cst.List, cst.Tuple)):
                elements.extend(element.value for element in arg.value.elements)
            else:
                elements.append(arg.value)
        items = []
        for element in elements:
            ref = self.module_ref(element, defaults) if isinstance(element, cst.Call) else None
            items.append(ref or ModuleRef(kind=None, origin=self.span_of(element)))
        return tuple(items)

    @staticmethod
    def _inplace(kind: str, call: cst.Call, defaults: dict[str, bool]) -> bool:
        index = torch_facts().inplace_modules.get(kind)
        if index is None:
            return False
        positional = [arg for arg in call.args if arg.keyword is None and arg.star == ""]
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "inplace":
                return bool(_literal_bool(arg.value, defaults))
        if index < len(positional):
            return bool(_literal_bool(positional[index].value, defaults))
        return False


def _self_attribute(target: cst.BaseExpression) -> str | None:
    if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
        return target.attr.value
    return None
