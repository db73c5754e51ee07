"""A call's arguments as values, and how they bind to a project function's parameters.

`*layers` and `**params` are spread when their contents are known (`nn.Sequential(*layers)`,
`act_layer(**{"inplace": True})`), so a call reads as the same call written out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from .syntax import is_integer_annotation, keyword_of, positional_params
from .values import NOT_TENSOR, DictVal, Module, Val, Value, as_integer, collapse, tensors_in

if TYPE_CHECKING:
    from .state import State


@dataclass(slots=True)
class Args:
    positional: list[Value] = field(default_factory=list)
    positional_exprs: list[cst.BaseExpression | None] = field(default_factory=list)
    keywords: dict[str, Value] = field(default_factory=dict)
    keyword_exprs: dict[str, cst.BaseExpression | None] = field(default_factory=dict)
    open: bool = False  # a `*args` / `**kwargs` whose contents are not known
    # The callee and its first argument as code where the call's own expressions are not them:
    # inside a Sequential, the layer (`model[1]`) and the previous layer's output
    # (`model[0](...)`), not the Sequential and the tensor given to it.
    callee_text: str | None = None
    input_text: str | None = None

    def values(self) -> list[Value]:
        return [*self.positional, *self.keywords.values()]

    def tensors(self) -> list[Val]:
        return [tensor for value in self.values() for tensor in tensors_in(value)]

    def get(self, name: str, position: int | None = None) -> Value | None:
        if name in self.keywords:
            return self.keywords[name]
        if position is not None and 0 <= position < len(self.positional):
            return self.positional[position]
        return None

    def expr(self, name: str, position: int | None = None) -> cst.BaseExpression | None:
        if name in self.keyword_exprs:
            return self.keyword_exprs[name]
        if position is not None and 0 <= position < len(self.positional_exprs):
            return self.positional_exprs[position]
        return None

    def prepend(self, values: list[Value], exprs: list[cst.BaseExpression | None] | None = None) -> Args:
        return Args(
            [*values, *self.positional],
            [*(exprs or [None] * len(values)), *self.positional_exprs],
            dict(self.keywords),
            dict(self.keyword_exprs),
            self.open,
        )

    def after_first(self) -> Args:
        """The arguments after the first positional one (`Base.forward(self, x)`: after `self`)."""
        return Args(
            self.positional[1:], self.positional_exprs[1:], dict(self.keywords), dict(self.keyword_exprs), self.open
        )

    def with_keywords(self, keywords: dict[str, Value]) -> Args:
        """Keywords given earlier (a `partial`'s) under the call's own."""
        merged = {**keywords, **self.keywords}
        exprs = {name: self.keyword_exprs.get(name) for name in merged}
        return Args(list(self.positional), list(self.positional_exprs), merged, exprs, self.open)


def spread(value: Value) -> list[Value] | None:
    """The items `*value` passes, when known (a comprehension's one representative element)."""
    value = collapse(value)
    if isinstance(value, Val) and value.items is not None and not value.is_tensor:
        return list(value.items)
    if isinstance(value, Module) and value.items is not None:
        return list(value.items)
    return None


def evaluate(call: cst.Call, evaluate_expr: Callable[[cst.BaseExpression, State], Value], state: State) -> Args:
    args = Args()
    for arg in call.args:
        value = evaluate_expr(arg.value, state)
        if arg.star == "*":
            items = spread(value)
            if items is None:
                args.open = True
                args.positional.append(NOT_TENSOR if not tensors_in(value) else value)
                args.positional_exprs.append(None)
            else:
                args.positional.extend(items)
                args.positional_exprs.extend([None] * len(items))
        elif arg.star == "**":
            spread_dict = collapse(value)
            if isinstance(spread_dict, DictVal):
                for key, item in spread_dict.entries:
                    if isinstance(key, str):
                        args.keywords[key] = item
                        args.keyword_exprs[key] = None
                if spread_dict.rest is not None:
                    args.open = True
            else:
                args.open = True
                if tensors_in(value):
                    args.keywords["\0spread"] = value
                    args.keyword_exprs["\0spread"] = None
        elif (keyword := keyword_of(arg)) is not None:
            args.keywords[keyword] = value
            args.keyword_exprs[keyword] = arg.value
        else:
            args.positional.append(value)
            args.positional_exprs.append(arg.value)
    return args


@dataclass(slots=True)
class Binding:
    """Each parameter of the callee and the value (and call-site expression) bound to it."""

    values: dict[str, Value]
    exprs: dict[str, cst.BaseExpression | None]
    missing: list[cst.Param]  # parameters no argument reached: their defaults apply

    def in_declared_order(self, func: cst.FunctionDef) -> None:
        """Puts the parameters in the order the callee declares them, whatever order the call
        gave them in: a run is remembered by its arguments (`Engine.run`) and its summary names
        them by position, so `Norm(c, act_layer=a, inplace=True)` and `Norm(c, inplace=True,
        act_layer=a)` are one context, not two."""
        params = func.params
        declared = [
            param.name.value
            for param in (
                *params.posonly_params,
                *params.params,
                params.star_arg,
                *params.kwonly_params,
                params.star_kwarg,
            )
            if isinstance(param, cst.Param)
        ]
        rank = {name: index for index, name in enumerate(declared)}
        order = sorted(self.values, key=lambda name: rank.get(name, len(rank)))
        self.values = {name: self.values[name] for name in order}
        self.exprs = {name: self.exprs.get(name) for name in order}


def bind(func: cst.FunctionDef, args: Args, skip: int) -> Binding:
    params = func.params
    positional = positional_params(func)[skip:]
    values: dict[str, Value] = {}
    exprs: dict[str, cst.BaseExpression | None] = {}
    extra: list[Value] = []
    for index, value in enumerate(args.positional):
        if index < len(positional):
            name = positional[index].name.value
            values[name], exprs[name] = value, args.positional_exprs[index]
        else:
            extra.append(value)
    keyword_params = {param.name.value for param in (*positional, *params.kwonly_params)}
    rest: dict[str, Value] = {}
    for name, value in args.keywords.items():
        if name in keyword_params:
            values[name], exprs[name] = value, args.keyword_exprs.get(name)
        else:
            rest[name] = value
    if isinstance(params.star_arg, cst.Param):
        values[params.star_arg.name.value] = (
            Val(items=tuple(extra)) if not args.open else Val(items=tuple(extra) or None)
        )
    if params.star_kwarg is not None:
        values[params.star_kwarg.name.value] = DictVal(
            tuple((key, value) for key, value in rest.items() if not key.startswith("\0"))
        )
    for param in (*positional, *params.kwonly_params):
        if param.name.value in values and is_integer_annotation(param.annotation):
            values[param.name.value] = as_integer(values[param.name.value])
    missing = [param for param in (*positional, *params.kwonly_params) if param.name.value not in values]
    return Binding(values, exprs, missing)
