"""Our span generator must give exactly LibCST's `PositionProvider` spans, node for node, and
`ParentNodeProvider`'s parents."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from torchlint_inplace.analysis.positions import Positions, positions_of

FIXTURES = sorted((Path(__file__).resolve().parent.parent / "fixtures").rglob("*.py"))
AWKWARD = {
    "crlf and a multi-line string": "x = 1\r\nif x:\r\n    y = '''a\r\nb'''\r\n",
    "lone carriage returns": "x = 1\ry = [\r  2,\r]\r",
    "decorators, comments and continuation": "@dec(\n    1)  # c\ndef f(a, *,\n      b=2):\n    return a \\\n        + b\n",
    "no trailing newline": "def f():\n    pass",
    "empty": "",
    "tabs and form feeds": "if x:\n\tif y:\n\t\tz = (1,\n\t\t     2)\n\x0cw = 3\n",
    "f-strings and walrus": "if (n := len(a)) > 10:\n    print(f'{n!r:>{w}} {a[0]}')\n",
}


def _assert_same_spans(module: cst.Module) -> int:
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    expected = wrapper.resolve(PositionProvider)
    ours = Positions(module)
    parents = wrapper.resolve(ParentNodeProvider)
    assert all(ours.parents.get(node) is parent for node, parent in parents.items())
    assert ours.parents.get(module) is None
    for node, code_range in expected.items():
        span = ours[node]
        assert (span.start.line, span.start.column, span.end.line, span.end.column) == (
            code_range.start.line, code_range.start.column, code_range.end.line, code_range.end.column,
        ), (type(node).__name__, module.code_for_node(node)[:60])  # fmt: skip
    return len(expected)


@pytest.mark.parametrize("text", AWKWARD.values(), ids=AWKWARD.keys())
def test_awkward_layouts(text: str) -> None:
    _assert_same_spans(cst.parse_module(text))


def test_every_fixture() -> None:
    assert sum(_assert_same_spans(cst.parse_module(path.read_bytes())) for path in FIXTURES) > 10_000


@pytest.mark.slow  # reads the installed torch package
def test_real_code_from_torch() -> None:
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        pytest.skip("torch is not installed: the fixtures stand in for real code")
    root = Path(spec.origin).parent
    for relative in ("nn/modules/rnn.py", "optim/adam.py", "_tensor.py", "nn/functional.py"):
        _assert_same_spans(cst.parse_module((root / relative).read_bytes()))


def test_positions_are_computed_once_per_module() -> None:
    module = cst.parse_module("x = 1\n")
    assert positions_of(module) is positions_of(module)
    assert positions_of(cst.parse_module("x = 1\n")) is not positions_of(module)
