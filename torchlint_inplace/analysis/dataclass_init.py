"""The `__init__` that `@dataclass` writes for a class, as syntax the interpreter runs like any.

Configuration objects are dataclasses in much real code (timm's `MaxxVitTransformerCfg`,
a training script's `Config`), and the layer a model builds hangs on their fields:
`norm_layer = get_norm_layer(cfg.norm_layer)` picks one class of a table by the string the
field holds. A dataclass has no `__init__` in its source, so without this its instances held
nothing, `cfg.norm_layer` was any string, and every class of the table was built and run at
every site that built one (a norm layer of each of 14 kinds in each timm block).

Python's generated method is spelled out here, as `dataclasses` documents it: one parameter per
field in definition order (the fields of dataclass bases of the same file first), its default
the field's (`= value`, `field(default=...)`, a call of `field(default_factory=...)`), keyword
only after `KW_ONLY` or with `kw_only=True`; `ClassVar`s are not fields; `field(init=False)`
assigns its default without a parameter; `InitVar`s are parameters handed to `__post_init__`,
which runs last when the class or a base of the same file defines it. Where a base is defined
in another file its fields cannot be ordered here: the class's own fields are then keyword
only, and positional arguments and unknown keywords go to `*args` / `**kwargs`.

The generated nodes are not in the file's tree: `generated_at` maps each to the decorator, where
anything reported inside it is shown.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from .imports import dotted
from .syntax import child_nodes

_DATACLASS = frozenset({"dataclasses.dataclass", "dataclass"})
_FIELD = frozenset({"dataclasses.field", "field"})


@dataclass(frozen=True)
class _Field:
    name: str
    default: cst.BaseExpression | None  # None: required
    init: bool
    kw_only: bool
    init_var: bool


def dataclass_decorator(
    node: cst.ClassDef, qualname: Callable[[cst.BaseExpression], str | None]
) -> cst.Decorator | None:
    """The class's `@dataclass` decorator when it writes an `__init__` (not `init=False`)."""
    for decorator in node.decorators:
        target = decorator.decorator
        call = target if isinstance(target, cst.Call) else None
        head = call.func if call is not None else target
        if (qualname(head) or dotted(head)) not in _DATACLASS:
            continue
        if call is not None and any(_is_false(arg, "init") for arg in call.args):
            return None
        return decorator
    return None


def generated_init(
    node: cst.ClassDef,
    decorator: cst.Decorator,
    bases: list[cst.ClassDef] | None,
    has_post_init: bool,
    qualname: Callable[[cst.BaseExpression], str | None],
) -> tuple[cst.FunctionDef, tuple[str, ...]]:
    """`def __init__(self, <fields>): self.<field> = <field>; ...; self.__post_init__(<init vars>)`,
    and the fields it stores as passed. `bases`: the dataclass bases of the same file, furthest
    first (None: one is elsewhere)."""
    fields: dict[str, _Field] = {}
    for owner in [*(bases or []), node]:
        own = decorator if owner is node else dataclass_decorator(owner, qualname)
        kw_only = (
            own is not None
            and isinstance(own.decorator, cst.Call)
            and any(_is_true(arg, "kw_only") for arg in own.decorator.args)
        )  # each class's own `kw_only` applies to the fields it defines
        for found in _fields(owner, kw_only, qualname):
            fields[found.name] = found  # a redefined field keeps its place, as Python's does
    positional: list[cst.Param] = []
    keyword: list[cst.Param] = []
    body: list[cst.BaseStatement] = []
    for found in fields.values():
        name = cst.Name(found.name)
        if found.init:
            param = cst.Param(
                name,
                default=found.default,
                equal=cst.AssignEqual() if found.default is not None else cst.MaybeSentinel.DEFAULT,
            )
            (keyword if found.kw_only or bases is None else positional).append(param)
        if found.init_var or (not found.init and found.default is None):
            continue
        value = name if found.init else found.default
        assert value is not None
        target = cst.AssignTarget(cst.Attribute(cst.Name("self"), cst.Name(found.name)))
        body.append(cst.SimpleStatementLine([cst.Assign([target], value)]))
    if has_post_init:
        init_vars = [cst.Arg(cst.Name(found.name)) for found in fields.values() if found.init_var]
        call = cst.Call(cst.Attribute(cst.Name("self"), cst.Name("__post_init__")), init_vars)
        body.append(cst.SimpleStatementLine([cst.Expr(call)]))
    params = cst.Parameters(
        params=[cst.Param(cst.Name("self")), *positional],
        star_arg=cst.Param(cst.Name("args")) if bases is None else cst.MaybeSentinel.DEFAULT,
        kwonly_params=keyword,
        star_kwarg=cst.Param(cst.Name("kwargs")) if bases is None else None,
    )
    stored = tuple(found.name for found in fields.values() if found.init and not found.init_var)
    body = body or [cst.SimpleStatementLine([cst.Pass()])]
    return cst.FunctionDef(cst.Name("__init__"), params, cst.IndentedBlock(body)), stored


def nodes_of(function: cst.FunctionDef) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []
    stack: list[cst.CSTNode] = [function]
    while stack:
        node = stack.pop()
        found.append(node)
        stack.extend(child_nodes(node))
    return found


def _fields(node: cst.ClassDef, kw_only: bool, qualname: Callable[[cst.BaseExpression], str | None]) -> list[_Field]:
    found: list[_Field] = []
    if not isinstance(node.body, cst.IndentedBlock):
        return found
    for statement in node.body.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if not isinstance(small, cst.AnnAssign) or not isinstance(small.target, cst.Name):
                continue
            head = _head(small.annotation.annotation)
            kind = (qualname(head) or dotted(head) or "").rsplit(".", 1)[-1]  # `dataclasses.KW_ONLY`: "KW_ONLY"
            if kind == "KW_ONLY":
                kw_only = True
                continue
            if kind == "ClassVar":
                continue
            default, init, own_kw_only = small.value, True, kw_only
            if isinstance(small.value, cst.Call) and (qualname(small.value.func) or dotted(small.value.func)) in _FIELD:
                default, init, own_kw_only = _field_call(small.value, kw_only)
            found.append(_Field(small.target.value, default, init, own_kw_only, kind == "InitVar"))
    return found


def _field_call(call: cst.Call, kw_only: bool) -> tuple[cst.BaseExpression | None, bool, bool]:
    default: cst.BaseExpression | None = None
    init = True
    for arg in call.args:
        keyword = arg.keyword.value if arg.keyword is not None else None
        if keyword == "default":
            default = arg.value
        elif keyword == "default_factory":
            default = cst.Call(arg.value)
        elif keyword == "init":
            init = not _is_false(arg, "init")
        elif keyword == "kw_only":
            kw_only = _is_true(arg, "kw_only")
    return default, init, kw_only


def _head(annotation: cst.BaseExpression) -> cst.BaseExpression:
    return annotation.value if isinstance(annotation, cst.Subscript) else annotation


def _is_false(arg: cst.Arg, keyword: str) -> bool:
    return arg.keyword is not None and arg.keyword.value == keyword and dotted(arg.value) == "False"


def _is_true(arg: cst.Arg, keyword: str) -> bool:
    return arg.keyword is not None and arg.keyword.value == keyword and dotted(arg.value) == "True"
