"""The `__init__` written for dataclasses (`analysis.dataclass_init`): its signature follows the
rules of Python's `dataclasses` (checked against Python's own generated signature where Python
can build the class), what it stores is what the fields hold, and anything reported inside it
is shown at the decorator. End to end: a field holds the tensor the building site passed."""

from __future__ import annotations

import inspect
import textwrap

import libcst as cst
import pytest

from torchlint_inplace.analysis.project import index_module
from torchlint_inplace.api import lint_source

CASES = {
    "plain": """
        @dataclass
        class C:
            a: int
            b: str = "x"
            c: list = field(default_factory=list)
        """,
    "classvar_and_init_false": """
        @dataclass
        class C:
            kind: ClassVar[str] = "k"
            a: int
            b: int = field(init=False, default=3)
            c: int = field(default=4)
        """,
    "kw_only": """
        @dataclass
        class C:
            a: int
            _: KW_ONLY
            b: int = 1
            c: int = field(default=2, kw_only=False)
        """,
    "decorator_kw_only": """
        @dataclasses.dataclass(kw_only=True, frozen=True)
        class C:
            a: int = 0
            b: int = 1
        """,
    "bases_of_the_file": """
        @dataclass
        class Base:
            a: int
            b: int = 2

        @dataclass
        class C(Base):
            c: int = 3
            a: int = 1
        """,
    "kw_only_base": """
        @dataclass(frozen=True, kw_only=True)
        class Base:
            a: int
            b: int = 1

        @dataclass(frozen=True)
        class C(Base):
            c: int = 2
            d: dict = field(default_factory=dict)
        """,
    "init_var": """
        @dataclass
        class C:
            a: int
            scale: InitVar[float] = 1.0

            def __post_init__(self, scale):
                self.b = self.a * scale
        """,
}

PRELUDE = """
import dataclasses
from dataclasses import KW_ONLY, InitVar, dataclass, field
from typing import ClassVar
"""


def _index(source: str):
    code = PRELUDE + textwrap.dedent(source)
    return code, index_module("m.py", cst.parse_module(code))


def _signature(init: cst.FunctionDef) -> str:
    return cst.Module([]).code_for_node(init.params)


@pytest.mark.parametrize("name", sorted(CASES))
def test_generated_signature_is_pythons(name: str) -> None:
    code, ctx = _index(CASES[name])
    namespace: dict[str, object] = {}
    exec(compile(code, "m.py", "exec", dont_inherit=True), namespace)  # noqa: S102 - the cases above only
    python = inspect.signature(namespace["C"].__init__)  # type: ignore[attr-defined]
    ours = ctx.classes["C"].methods["__init__"]
    params = [*ours.params.params, *ours.params.kwonly_params]
    assert [p.name.value for p in params] == list(python.parameters)
    kinds = [
        inspect.Parameter.KEYWORD_ONLY if p in ours.params.kwonly_params else inspect.Parameter.POSITIONAL_OR_KEYWORD
        for p in params
    ]
    assert kinds == [p.kind for p in python.parameters.values()]
    defaults = [p.default is not None for p in params]
    assert defaults == [p.default is not inspect.Parameter.empty for p in python.parameters.values()]


def test_stored_fields_and_post_init() -> None:
    _, ctx = _index(CASES["classvar_and_init_false"])
    info = ctx.classes["C"]
    assert info.fields == ("a", "c")
    body = cst.Module([]).code_for_node(info.methods["__init__"].body)
    assert "self.b = 3" in body and "kind" not in body
    _, ctx = _index(CASES["init_var"])
    info = ctx.classes["C"]
    assert info.fields == ("a",)
    assert "self.__post_init__(scale)" in cst.Module([]).code_for_node(info.methods["__init__"].body)


def test_base_elsewhere_binds_by_keyword_only() -> None:
    _, ctx = _index(
        """
        from elsewhere import Base

        @dataclass
        class C(Base):
            a: int = 1
        """
    )
    params = ctx.classes["C"].methods["__init__"].params
    assert [p.name.value for p in params.params] == ["self"]
    assert [p.name.value for p in params.kwonly_params] == ["a"]
    assert isinstance(params.star_arg, cst.Param) and params.star_kwarg is not None


@pytest.mark.parametrize(
    "source",
    [
        "@dataclass(init=False)\nclass C:\n    a: int = 1\n",
        "@dataclass\nclass C:\n    a: int = 1\n    def __init__(self):\n        self.a = 2\n",
        "class C:\n    a: int = 1\n",
    ],
)
def test_no_init_is_written(source: str) -> None:
    _, ctx = _index(source)
    init = ctx.classes["C"].methods.get("__init__")
    assert init is None or init.body.body[0].body[0].targets[0].target.value.value == "self"  # type: ignore[attr-defined]
    assert not ctx.generated_at and ctx.classes["C"].fields == ()


def test_generated_nodes_are_shown_at_the_decorator() -> None:
    _, ctx = _index(CASES["plain"])
    init = ctx.classes["C"].methods["__init__"]
    decorator = ctx.classes["C"].node.decorators[0]
    assert ctx.span_of(init) == ctx.span_of(decorator)
    assert ctx.span_of(init.body.body[0]) == ctx.span_of(decorator)


OUTPUT = """
from dataclasses import dataclass

import torch
import torch.nn as nn


@dataclass
class Output:
    logits: torch.Tensor
    hidden: torch.Tensor


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        h = torch.sigmoid(self.proj(x))
        return Output(h * 2, hidden=h)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()

    def forward(self, x):
        out = self.encoder(x)
        out.{field}.mul_(0.5)
        return out.logits.sum()
"""


@pytest.mark.parametrize(("field", "expected"), [("hidden", ["TIP001"]), ("logits", [])])
def test_a_field_holds_what_the_site_passed(field: str, expected: list[str]) -> None:
    found = lint_source(OUTPUT.replace("{field}", field), "net.py")
    assert [finding.code for finding in found] == expected
