"""Small readings of LibCST syntax the analysis needs in several places."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields
from functools import lru_cache

import libcst as cst

from .imports import dotted
from .vocabulary import CONTAINER_FILLING_METHODS


def keyword_of(arg: cst.Arg) -> str | None:
    return arg.keyword.value if arg.keyword is not None else None


@lru_cache(maxsize=4096)
def evaluated_literal(text: str) -> object:
    """A number's or a string's value, as LibCST's `evaluated_value` gives it (`ast.literal_eval`,
    a compile each time): the same literals are read on every run of a function, ~2,500 times
    per version of a 1,000-line model file, and their values are immutable."""
    return ast.literal_eval(text)


def optional_forms(names: Iterable[str]) -> frozenset[str]:
    """How an annotation of one of `names` reads as `annotation_text` gives it: bare, optional
    (`Optional[X]`, `X | None`, `None | X`) or quoted."""
    wraps = (("", ""), ("Optional[", "]"), ("", "|None"), ("None|", ""), ("'", "'"), ('"', '"'))
    return frozenset(f"{head}{name}{tail}" for name in names for head, tail in wraps)


# The legacy typed-tensor names say the dtype, and an integer or boolean tensor never requires grad.
_INTEGER_TENSOR_ANNOTATIONS = optional_forms(
    f"{prefix}{name}Tensor"
    for prefix in ("", "torch.", "th.", "torch.cuda.")
    for name in ("Long", "Int", "Short", "Char", "Byte", "Bool")
)


def annotation_text(annotation: cst.Annotation | None) -> str:
    """An annotation as compact text (`torch.Tensor|None`), "" where there is none."""
    if annotation is None:
        return ""
    expr = annotation.annotation
    # Most annotations are a name (`int`, `torch.Tensor`): read it without generating code.
    return dotted(expr) or _generated_annotation(expr)


@lru_cache(maxsize=4096)
def _generated_annotation(expr: cst.BaseExpression) -> str:
    """Every call binds its parameters and reads their annotations: each generated once (nodes
    hash by identity), not once per call."""
    return cst.Module([]).code_for_node(expr).replace(" ", "")


_TENSOR_ANNOTATIONS = optional_forms(("Tensor", "torch.Tensor", "th.Tensor"))


def is_tensor_annotation(annotation: cst.Annotation | None) -> bool:
    """`torch.Tensor`, `Optional[Tensor]`, `Tensor | None`, and a union that admits a tensor
    (PyG's `x: Union[Tensor, PairTensor]`, which `forward` turns into a pair itself when it is
    given one tensor)."""
    if annotation is None:
        return False
    return annotation_text(annotation) in _TENSOR_ANNOTATIONS or any(
        dotted(member) in _TENSOR_ANNOTATIONS for member in _union_members(annotation.annotation)
    )


def _union_members(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The members of `Union[A, B]` / `A | B` (none for any other annotation)."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.BitOr):
        return [*(_union_members(expr.left) or [expr.left]), *(_union_members(expr.right) or [expr.right])]
    if isinstance(expr, cst.Subscript) and dotted(expr.value) in ("Union", "typing.Union"):
        return [element.slice.value for element in expr.slice if isinstance(element.slice, cst.Index)]
    return []


def is_integer_annotation(annotation: cst.Annotation | None) -> bool:
    """`torch.LongTensor`, `Optional[torch.BoolTensor]`, `torch.IntTensor | None`."""
    return annotation_text(annotation) in _INTEGER_TENSOR_ANNOTATIONS


def literal(expr: cst.BaseExpression) -> bool | None:
    if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
        return expr.value == "True"
    return None


def positional_params(func: cst.FunctionDef) -> list[cst.Param]:
    """The parameters a positional argument can bind: positional-only ones first, in order."""
    return [*func.params.posonly_params, *func.params.params]


def named_params(func: cst.FunctionDef) -> list[cst.Param]:
    """The parameters a caller can name (not `*args`, `**kwargs`)."""
    return [*positional_params(func), *func.params.kwonly_params]


def spread_names(node: cst.CSTNode, stars: tuple[str, ...] = ("*", "**")) -> list[str]:
    """The names a call spreads into its arguments, in order (`f(*xs)`, `model(**inputs)`)."""
    if not isinstance(node, cst.Call):
        return []
    return [arg.value.value for arg in node.args if arg.star in stars and isinstance(arg.value, cst.Name)]


def is_property(node: cst.FunctionDef) -> bool:
    return any(
        dotted(decorator.decorator) in ("property", "cached_property", "functools.cached_property")
        for decorator in node.decorators
    )


def is_self(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "self"


def names_read(expr: cst.CSTNode) -> set[str]:
    """Every name and attribute chain an expression reads: `view_as_real(r) if c else r` -> {r, c, ...}."""
    found: set[str] = set()
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        name = dotted(node) if type(node) is cst.Name or type(node) is cst.Attribute else None
        if name is not None:
            found.add(name)
        stack.extend(child_nodes(node))
    return found


_FIELDS: dict[type, tuple[str, ...]] = {}
# Fields that hold only layout (whitespace, comments, brackets, commas, `=` and `:` tokens):
# no walk of the analysis reads them, and they are about half of a tree's nodes.
_LAYOUT_FIELDS = frozenset(
    {
        "leading_lines", "lines_after_decorators", "header", "footer", "empty_lines", "comment",
        "newline", "first_line", "last_line", "leading_whitespace", "trailing_whitespace",
        "lpar", "rpar", "lbrace", "rbrace", "lbracket", "rbracket", "comma", "trailing_comma",
        "semicolon", "colon", "first_colon", "second_colon", "equal", "dot",
    }
)  # fmt: skip
# Whether a type is a LibCST node, by exact type: LibCST's classes are ABCs, and `isinstance`
# against one runs `ABCMeta.__instancecheck__` in Python (18 M times over timm, 5 s profiled).
_NODE_TYPES: dict[type, bool] = {}


def _is_node(value: object) -> bool:
    kind = type(value)
    known = _NODE_TYPES.get(kind)
    if known is None:
        known = _NODE_TYPES[kind] = issubclass(kind, cst.CSTNode)
    return known


def child_nodes(node: cst.CSTNode) -> list[cst.CSTNode]:
    """`node.children` less layout, read off the node's fields: LibCST computes `children` by
    visiting the node with a collecting visitor, 2.5x slower, and the analysis walks whole
    function bodies."""
    names = _FIELDS.get(type(node))
    if names is None:
        names = _FIELDS[type(node)] = tuple(
            field.name
            for field in fields(node)
            if field.name not in _LAYOUT_FIELDS and not field.name.startswith("whitespace")
        )
    found: list[cst.CSTNode] = []
    for name in names:
        value = getattr(node, name)
        kind = type(value)
        if kind is list or kind is tuple:
            found.extend(item for item in value if _is_node(item))
        elif _is_node(value):
            found.append(value)
    return found


def descendants(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """`node` and every node under it, layout left out (`child_nodes`)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(child_nodes(current))


# Displays of Python containers and strings: a tensor cannot be combined with one in place
# (`t += [1.0]` raises TypeError), so a target they are added to is a Python object.
_NOT_TENSOR_OPERANDS = (
    cst.List, cst.Tuple, cst.Dict, cst.Set, cst.ListComp, cst.DictComp, cst.SetComp,
    cst.SimpleString, cst.ConcatenatedString, cst.FormattedString,
)  # fmt: skip


def never_tensor_operand(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, _NOT_TENSOR_OPERANDS)


def string_index(expr: cst.Subscript) -> bool:
    return any(
        isinstance(element.slice, cst.Index)
        and isinstance(element.slice.value, (cst.SimpleString, cst.ConcatenatedString))
        for element in expr.slice
    )


def names_in(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, (cst.Tuple, cst.List)):
        return [name for element in target.elements for name in names_in(element.value)]
    name = dotted(target)
    return [name] if name is not None else []


def operand_exprs(node: cst.CSTNode) -> dict[str, cst.BaseExpression]:
    """The operand of an in-place statement as written: `x *= y` -> y, `x.mul_(y)` -> y."""
    if isinstance(node, cst.AugAssign):
        return {"other": node.value}
    if isinstance(node, cst.Call) and node.args and node.args[0].keyword is None:
        return {"other": node.args[0].value}
    return {}


def if_tests_around(func: cst.FunctionDef) -> dict[int, frozenset[str]]:
    """Each node of `func` under an `if` (by id), with the names the tests of the `if`s around
    it read: whether a call's `True`/`False` literal (`functional=False`, `inplace=True`) chose
    the path that holds a node is whether it names one of those."""
    around: dict[int, frozenset[str]] = {}
    stack: list[tuple[cst.CSTNode, frozenset[str]]] = [(func.body, frozenset())]
    while stack:
        current, tests = stack.pop()
        if tests:
            around[id(current)] = tests
        if isinstance(current, cst.If):
            tests = tests | names_read(current.test)
        stack.extend((child, tests) for child in child_nodes(current))
    return around


_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Words:
    """What a piece of code mentions: the names it uses (attributes' included) and the words of
    its string literals (`getattr(nn, "ReLU")`, a registry's keys)."""

    names: frozenset[str]
    in_strings: frozenset[str]

    @property
    def all(self) -> frozenset[str]:
        return self.names | self.in_strings


def words_of(node: cst.CSTNode) -> Words:
    names: set[str] = set()
    in_strings: set[str] = set()
    stack: list[cst.CSTNode] = [node]
    while stack:
        current = stack.pop()
        kind = type(current)
        if kind is cst.Name:
            names.add(current.value)  # type: ignore[attr-defined]
        elif kind is cst.SimpleString or kind is cst.FormattedStringText:
            in_strings.update(_WORD.findall(current.value))  # type: ignore[attr-defined]
        else:
            stack.extend(child_nodes(current))
    return Words(frozenset(names), frozenset(in_strings))


def filled_names(body: cst.CSTNode) -> frozenset[str]:
    """The names whose list or dict a body stores into or grows (`kept[k] = v`,
    `kept.append(v)`): the state a hook leaves behind for whoever registered it."""
    found: set[str] = set()
    stack: list[cst.CSTNode] = [body]
    while stack:
        current = stack.pop()
        kind = type(current)
        if kind is cst.AssignTarget or kind is cst.AugAssign:
            target = current.target  # type: ignore[attr-defined]
            if type(target) is cst.Subscript and type(target.value) is cst.Name:
                found.add(target.value.value)
        elif kind is cst.Call:
            func = current.func  # type: ignore[attr-defined]
            if (
                type(func) is cst.Attribute
                and type(func.value) is cst.Name
                and func.attr.value in CONTAINER_FILLING_METHODS
            ):
                found.add(func.value.value)
        stack.extend(child_nodes(current))
    return frozenset(found)
