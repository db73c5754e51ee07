"""What Python knows of a construction value (`analysis.python_types`), and a factory that
relies on it end to end: given a class, `get_norm_act_layer`-style code returns the one class
Python would, not its whole table.

Each answer is checked both ways: the cases where the analysis must answer, and the ones where
it must not (a value whose type it does not know, a kind it cannot name), since a wrong
"false" would drop a path that holds a finding.
"""

from __future__ import annotations

import libcst as cst
import pytest

from torchlint_inplace import analysis
from torchlint_inplace.analysis.classes import ClassInfo
from torchlint_inplace.analysis.python_types import (
    class_name,
    isinstance_of_known,
    may_contain,
    partial_attribute,
    same_object,
)
from torchlint_inplace.analysis.values import (
    NOT_TENSOR,
    Choice,
    Const,
    DictVal,
    Func,
    Klass,
    Partial,
    Sym,
    Val,
    fresh_storage,
)

STR = Func("str", qualname="builtins.str")
TYPE = Func("type", qualname="builtins.type")
FUNCTION = Func("FunctionType", qualname="types.FunctionType")
PARTIAL = Klass("partial", "functools.partial")
RELU = Klass("ReLU", "torch.nn.ReLU")
GELU = Klass("GELU", "torch.nn.GELU")
BLOCK = cst.ensure_type(cst.parse_statement("class Block: pass"), cst.ClassDef)
PROJECT = Klass("Block", ref=ClassInfo("Block", ("torch.nn.Module",), BLOCK, "m.py"))


@pytest.mark.parametrize(
    ("value", "kinds", "expected"),
    [
        (RELU, [STR], False),
        (RELU, [TYPE], True),
        (RELU, [TYPE, STR, FUNCTION, PARTIAL], True),
        (Const("relu"), [STR], True),
        (Const("relu"), [TYPE, PARTIAL], False),
        (Const(True), [Func("int", qualname="builtins.int")], True),
        (Const(None), [STR], False),
        (Partial(RELU), [PARTIAL], True),
        (Partial(RELU), [TYPE, STR], False),
        # Not answered: a dict value may be a `SimpleNamespace` or a config object, and a
        # project class may be an enum whose members are constants.
        (DictVal(), [Func("dict", qualname="builtins.dict")], None),
        (DictVal(), [Klass("SimpleNamespace", "types.SimpleNamespace")], None),
        (Const("relu"), [PROJECT], None),
        (Sym("act"), [STR], None),
        (Val(fresh_storage()), [STR], None),
        (NOT_TENSOR, [STR], None),
        (Const("relu"), [Func("Enum", qualname="enum.Enum")], None),
        (Const("relu"), [NOT_TENSOR], None),
    ],
)
def test_isinstance_is_answered_only_for_known_types_and_kinds(value, kinds, expected) -> None:
    assert isinstance_of_known(value, kinds) is expected


def test_classes_compare_by_identity_and_are_never_constants() -> None:
    assert same_object(RELU, Klass("ReLU", "torch.nn.ReLU")) is True
    assert same_object(RELU, GELU) is False
    assert same_object(RELU, PROJECT) is False
    assert same_object(PROJECT, PROJECT) is True
    assert same_object(Const(None), RELU) is False
    assert same_object(RELU, Sym("act")) is None
    assert same_object(Const(1), Const(1)) is None  # constants are `_compare`'s own business


def test_membership_is_only_ever_denied() -> None:
    table = (Choice(((frozenset(), RELU), (frozenset(), GELU))),)
    assert may_contain(table, Klass("BatchNorm2d", "torch.nn.BatchNorm2d")) is False
    assert may_contain(table, RELU) is True
    assert may_contain((NOT_TENSOR,), Klass("BatchNorm2d", "torch.nn.BatchNorm2d")) is True


def test_names_and_partial_fields() -> None:
    assert class_name(Klass("BN", "torch.nn.modules.batchnorm.BatchNorm2d")) == "BatchNorm2d"
    assert class_name(PROJECT) == "Block"
    bound = Partial(RELU, (Const(1),), (("inplace", Const(True)),))
    assert partial_attribute(bound, "func") == RELU
    assert partial_attribute(bound, "args") == Val(items=(Const(1),))
    keywords = partial_attribute(bound, "keywords")
    assert isinstance(keywords, DictVal) and keywords.get("inplace") == Const(True)
    assert partial_attribute(bound, "other") is NOT_TENSOR


FACTORY = """\
import functools
import types
import torch
import torch.nn as nn


class InplaceAct(nn.Module):
    def forward(self, x):
        return x.mul_(2)


class PlainAct(nn.Module):
    def forward(self, x):
        return x * 2


_BY_NAME = dict(batchnorm2d=InplaceAct, layernorm=PlainAct)
_TYPES = {m for m in _BY_NAME.values()}


def get_layer(layer):
    assert isinstance(layer, (type, str, types.FunctionType, functools.partial))
    if isinstance(layer, functools.partial):
        layer = layer.func
    if isinstance(layer, str):
        return _BY_NAME[layer.replace("_", "").lower().split("-")[0]]
    if layer in _TYPES:
        return layer
    return _BY_NAME.get(layer.__name__.lower())




def train():
    act = get_layer(KIND)()
    y = torch.sigmoid(torch.randn(4, requires_grad=True))
    act(y)
    y.sum().backward()
"""

KINDS = {
    "by_class": "nn.BatchNorm2d",
    "by_partial": "functools.partial(nn.LayerNorm, eps=1e-6)",
    "by_name": '"Batch_Norm2d-x"',
}


@pytest.mark.parametrize(("entry", "writes"), [("by_class", True), ("by_partial", False), ("by_name", True)])
def test_a_factory_returns_the_one_class_python_would(entry: str, writes: bool) -> None:
    """Each caller picks a layer through a different test: `nn.BatchNorm2d` by its lowered
    `__name__`, a partial of `nn.LayerNorm` through `.func`, a string through `replace`,
    `lower` and `split`. Only `InplaceAct` writes the sigmoid output it is given. Without the
    answers the factory returns both classes and every caller is told of the write."""
    code = FACTORY.replace("KIND", KINDS[entry])
    found = analysis.analyze(cst.parse_module(code), "factory.py").mutations
    write_line = FACTORY.splitlines().index("        return x.mul_(2)") + 1
    lines = {analysis_line(mutation) for mutation in found}
    assert (write_line in lines) is writes, lines


def analysis_line(mutation: analysis.Mutation) -> int:
    return mutation.span.start.line
