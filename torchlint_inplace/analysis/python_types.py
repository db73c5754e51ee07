"""What Python itself knows of a construction value: its type, a class's `__name__`, whether two
class values are the same class.

Factories pick a layer by testing what they were given (timm's `get_norm_act_layer`:
`isinstance(norm_layer, str)`, `norm_layer in _NORM_ACT_TYPES`, `norm_layer.__name__.lower()`).
Without these answers every test stays open and a factory given `nn.BatchNorm2d` returns every
class of its table: the analysis then builds and runs all of them at each call site, and a
finding of one of them reads as if the user had built it.
"""

from __future__ import annotations

from .values import NOT_TENSOR, Const, DictVal, Func, Klass, Partial, Val, Value, fresh_id, options_of

# `isinstance` kinds named by a builtin's qualname (`str` is `Func("str", "builtins.str")`); the
# other kinds the analysis can name are classes (`Klass`): torch's, `functools.partial`.
_BUILTIN_KINDS = frozenset(
    f"builtins.{name}"
    for name in ("str", "int", "float", "bool", "complex", "bytes", "type", "dict", "list", "tuple", "set", "frozenset")
) | frozenset({"types.FunctionType", "types.LambdaType", "types.MethodType", "types.BuiltinFunctionType"})


def kind_of(kind: Value) -> str | None:
    """The qualname an `isinstance` kind stands for, or None if the analysis cannot tell what it
    is. A project class is not named: an enum's member is a constant and an instance of it."""
    if isinstance(kind, Klass):
        return kind.qualname
    if isinstance(kind, Func) and kind.qualname in _BUILTIN_KINDS:
        return kind.qualname
    return None


def types_of(value: Value) -> frozenset[str] | None:
    """The qualnames of the classes `value` is an instance of, for the values whose Python
    type the analysis knows exactly; None for the others (tensors, modules, unknowns)."""
    if isinstance(value, Const):
        return _CONSTANT_TYPES.get(type(value.value))
    if isinstance(value, Klass):
        return frozenset({"builtins.type"})
    if isinstance(value, Partial):
        return frozenset({"functools.partial"})
    if isinstance(value, Func) and value.ref is not None:
        return frozenset({"types.MethodType" if value.bound is not None else "types.FunctionType", "types.LambdaType"})
    return None  # a dict value may be a `SimpleNamespace`, an `argparse.Namespace`, a config object


_CONSTANT_TYPES = {
    str: frozenset({"builtins.str"}),
    bytes: frozenset({"builtins.bytes"}),
    bool: frozenset({"builtins.bool", "builtins.int"}),
    int: frozenset({"builtins.int"}),
    float: frozenset({"builtins.float"}),
    complex: frozenset({"builtins.complex"}),
    type(None): frozenset(),
}


def isinstance_of_known(value: Value, kinds: list[Value]) -> bool | None:
    """`isinstance(value, kinds)` for a value of a known Python type, when every kind is one
    the analysis can name; else None."""
    types = types_of(value)
    if types is None:
        return None
    named = [kind_of(kind) for kind in kinds]
    if any(kind is None for kind in named):
        return None
    return any(kind in types for kind in named)


def class_name(value: Klass) -> str:
    """A class's `__name__`: the last part of a torch qualname, a project class's own name."""
    if value.ref is not None:
        return value.ref.name
    return (value.qualname or value.name).rsplit(".", 1)[-1]


def same_object(left: Value, right: Value) -> bool | None:
    """`left is right` (and `==`, which a class does not override) when one side is a class:
    the same torch qualname or the same project class; a class is never a constant."""
    if not isinstance(left, Klass):
        left, right = right, left
    if not isinstance(left, Klass):
        return None
    if isinstance(right, Const):
        return False
    if not isinstance(right, Klass):
        return None
    if left.ref is not None or right.ref is not None:
        return left.ref is right.ref
    return left.qualname == right.qualname


def may_contain(items: tuple[Value, ...], value: Value) -> bool:
    """Whether a container whose elements are among `items` (each item's options) may hold the
    class `value`: False only when no option can be that very class."""
    return any(same_object(value, option) is not False for item in items for _, option in options_of(item))


def partial_attribute(value: Partial, attr: str) -> Value:
    """`functools.partial`'s `func`, `args` and `keywords`, as factories unbind a partial to
    rebind its arguments (`norm_layer.keywords` merged into new ones, `norm_layer.func` looked
    up in a table)."""
    if attr == "func":
        return value.target
    if attr == "args":
        return Val(items=value.args)
    if attr == "keywords":
        return DictVal(value.kwargs, cell=fresh_id())
    return NOT_TENSOR
