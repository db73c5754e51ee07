"""What a class's `__init__` says about its attributes: submodules, parameters, buffers.

`self.act = nn.ReLU(inplace=True)` in `__init__` is what makes `self.act(x)` in `forward`
an in-place write to `x`; `self.w = nn.Parameter(...)` is what makes `self.w` a leaf that
requires grad. Only constructor calls are read; nothing is executed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from .imports import Imports, dotted
from .torch_facts import torch_facts
from .values import ModuleRef

AUTOGRAD_FUNCTION_BASES = frozenset({"torch.autograd.Function", "torch.autograd.function.Function"})
_CONTAINERS = frozenset({"Sequential", "ModuleList"})


@dataclass
class ClassInfo:
    name: str
    bases: tuple[str, ...]
    modules: dict[str, ModuleRef] = field(default_factory=dict)
    parameters: dict[str, cst.CSTNode] = field(default_factory=dict)  # name -> the node that made it
    buffers: dict[str, cst.CSTNode] = field(default_factory=dict)
    methods: dict[str, cst.FunctionDef] = field(default_factory=dict)

    def inherit(self, base: "ClassInfo") -> None:
        """What a subclass gets from a base class defined in the same project."""
        for mine, theirs in ((self.modules, base.modules), (self.parameters, base.parameters), (self.buffers, base.buffers), (self.methods, base.methods)):
            for key, value in theirs.items():
                mine.setdefault(key, value)

    @property
    def is_torch_module(self) -> bool:
        """Subclasses torch.nn.Module (directly or through another torch.nn class)."""
        return any(base.startswith("torch.nn.") for base in self.bases)

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
    def __init__(self, imports: Imports, factories: dict[str, cst.FunctionDef]) -> None:
        self.imports = imports
        self._lists: dict[str, list[cst.BaseExpression]] = {}
        self.factories = factories  # module-level functions, for `self.mlp = make_mlp(dim)`

    def read(self, node: cst.ClassDef) -> ClassInfo:
        bases = tuple(self.imports.qualname(arg.value) or dotted(arg.value) or "" for arg in node.bases)
        info = ClassInfo(node.name.value, bases)
        for statement in node.body.body:
            if isinstance(statement, cst.FunctionDef):
                info.methods[statement.name.value] = statement
                if statement.name.value == "__init__":
                    self._read_init(statement, info)
        return info

    def _read_init(self, init: cst.FunctionDef, info: ClassInfo) -> None:
        from .project import statements  # the shared statement walk

        defaults = _init_bool_defaults(init)
        self._lists = {}  # `layers = [...]` for `nn.Sequential(*layers)`
        for node, _ in statements(init.body.body):
            if isinstance(node, (cst.FunctionDef, cst.ClassDef)) or not isinstance(node, cst.SimpleStatementLine):
                continue
            for small in node.body:
                if isinstance(small, cst.Assign):
                    for target in small.targets:
                        name = _self_attribute(target.target)
                        if name is not None:
                            self._read_assignment(name, small.value, info, defaults)
                        elif isinstance(target.target, cst.Name) and isinstance(small.value, (cst.List, cst.Tuple)):
                            self._lists[target.target.value] = [element.value for element in small.value.elements]
                        else:
                            # `rep = rep[1:]`, `rep[0] = nn.ReLU()`: no longer a list we know
                            self._lists.pop(_root(target.target), None)
                elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                    self._read_registration(small.value, info)
                    self._read_append(small.value)

    def _read_append(self, call: cst.Call) -> None:
        """`layers.append(nn.ReLU())` / `layers.extend([...])` on a local list."""
        func = call.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value in self._lists and call.args:
            value = call.args[0].value
            if func.attr.value == "append":
                self._lists[func.value.value].append(value)
            elif func.attr.value == "extend" and isinstance(value, (cst.List, cst.Tuple)):
                self._lists[func.value.value].extend(element.value for element in value.elements)
            else:
                del self._lists[func.value.value]  # insert, pop, remove, ...: forget it

    @staticmethod
    def _read_registration(call: cst.Call, info: ClassInfo) -> None:
        """self.register_buffer("name", tensor) / self.register_parameter("name", p)"""
        func = call.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self" and call.args:
            first = call.args[0].value
            if func.attr.value in ("register_buffer", "register_parameter") and isinstance(first, cst.SimpleString):
                table = info.buffers if func.attr.value == "register_buffer" else info.parameters
                table[first.evaluated_value] = call

    def _read_assignment(self, name: str, value: cst.BaseExpression, info: ClassInfo, defaults: dict[str, bool]) -> None:
        if not isinstance(value, cst.Call):
            return
        qualname = self.imports.qualname(value.func) or ""
        if qualname == "torch.nn.Parameter":
            info.parameters[name] = value
            return
        module = self.module_ref(value, defaults)
        if module is not None:
            info.modules[name] = module

    def module_ref(self, call: cst.Call, defaults: dict[str, bool]) -> ModuleRef | None:
        qualname = self.imports.qualname(call.func)
        if qualname is None or not qualname.startswith("torch.nn."):
            name = dotted(call.func) or ""
            factory = self.factories.get(name)
            if factory is not None:
                returned = _single_return(factory)
                if isinstance(returned, cst.Call) and returned.func is not call.func:
                    return self.module_ref(returned, _init_bool_defaults(factory))
            # A project class: CamelCase constructor calls are taken to be modules.
            short = name.rsplit(".", 1)[-1]
            return ModuleRef(kind=None, origin=call, cls_name=name) if short[:1].isupper() else None
        kind = qualname[len("torch.nn."):]
        if kind in _CONTAINERS:
            return ModuleRef(kind=kind, items=self._container_items(call, defaults), origin=call)
        return ModuleRef(kind=kind, inplace=self._inplace(kind, call, defaults), origin=call)

    def _container_items(self, call: cst.Call, defaults: dict[str, bool]) -> tuple[ModuleRef, ...]:
        elements: list[cst.BaseExpression] = []
        for arg in call.args:
            value = arg.value
            if isinstance(value, (cst.List, cst.Tuple)):
                elements.extend(element.value for element in value.elements)
            elif arg.star == "*" and isinstance(value, cst.Name) and value.value in self._lists:
                elements.extend(self._lists[value.value])
            elif isinstance(value, (cst.GeneratorExp, cst.ListComp)):
                elements.append(value.elt)  # one representative of a homogeneous container
            else:
                elements.append(value)
        items = []
        for element in elements:
            ref = self.module_ref(element, defaults) if isinstance(element, cst.Call) else None
            items.append(ref or ModuleRef(kind=None, origin=element))
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


def _single_return(func: cst.FunctionDef) -> cst.BaseExpression | None:
    """The expression a small factory function returns, when it has exactly one return."""
    returns = [
        small.value
        for statement in func.body.body
        if isinstance(statement, cst.SimpleStatementLine)
        for small in statement.body
        if isinstance(small, cst.Return)
    ]
    return returns[0] if len(returns) == 1 else None


def _root(target: cst.BaseExpression) -> str | None:
    while isinstance(target, (cst.Subscript, cst.Attribute)):
        target = target.value
    return target.value if isinstance(target, cst.Name) else None


def _self_attribute(target: cst.BaseExpression) -> str | None:
    if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
        return target.attr.value
    return None
