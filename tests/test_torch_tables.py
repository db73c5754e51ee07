"""The committed torch facts must match the installed torch, and mean what they say.

The JSON is read without torch by the analysis; this test (torch required) regenerates
it in-process and checks a few facts against autograd's real behaviour, so that a
wrong derivation cannot hide behind a self-consistent file.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
DATA = REPO_ROOT / "torchlint_inplace" / "data" / "torch_ops.json"


@pytest.fixture(scope="module")
def committed() -> dict:
    return json.loads(DATA.read_text())


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def generator(torch):
    spec = importlib.util.spec_from_file_location("gen_torch_tables", REPO_ROOT / "scripts" / "gen_torch_tables.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def saved_storages(torch, call) -> set[int]:
    packed: set[int] = set()

    def pack(tensor):
        packed.add(tensor.untyped_storage().data_ptr())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        call()
    return packed


def test_committed_file_is_small_and_says_how_to_regenerate(committed):
    assert DATA.stat().st_size < 1_000_000
    assert committed["regenerate"] == "python scripts/gen_torch_tables.py"


@pytest.mark.slow  # imports torch
def test_regenerating_reproduces_the_committed_file(generator, committed, torch):
    if committed["torch_version"] != torch.__version__.split("+")[0]:
        pytest.skip(f"data generated for torch {committed['torch_version']}, installed {torch.__version__}")
    fresh = generator.build_tables()
    assert generator.diff_summary(committed, fresh) == []
    assert generator.render(fresh) == DATA.read_text()


@pytest.mark.slow  # imports torch
def test_mul_saves_each_operand_for_the_other(committed, torch):
    assert committed["ops"]["mul"]["saves"] == {"self": ["other"], "other": ["self"]}
    a = torch.rand(3, requires_grad=True)
    b = torch.rand(3)
    saved = saved_storages(torch, lambda: a * b)
    assert b.untyped_storage().data_ptr() in saved
    assert a.untyped_storage().data_ptr() not in saved


@pytest.mark.slow  # imports torch
@pytest.mark.parametrize("name", ["sigmoid", "tanh", "exp", "relu", "softmax", "log_softmax"])
def test_activations_save_their_result(committed, torch, name):
    assert committed["ops"][name]["saves"] == {"result": ["self"]}
    x = torch.rand(3, 4, requires_grad=True)
    op = getattr(torch, name)
    holder = {}
    saved = saved_storages(torch, lambda: holder.setdefault("y", op(x, -1) if "softmax" in name else op(x)))
    assert holder["y"].untyped_storage().data_ptr() in saved


@pytest.mark.parametrize("name", ["add", "sub", "cat", "stack"])
def test_linear_ops_save_nothing(committed, name):
    assert committed["ops"][name]["saves"] == {}


@pytest.mark.parametrize("name", ["matmul", "mm", "bmm"])
def test_matrix_products_save_both_operands(committed, name):
    saves = committed["ops"][name]["saves"]
    first, second = committed["ops"][name]["params"][:2]
    assert saves[first] == [second] and saves[second] == [first]


def test_modules(committed):
    assert committed["modules"]["Linear"]["saves"] == ["input"]
    assert committed["modules"]["ReLU"]["saves"] == ["result"]
    assert committed["modules"]["Identity"]["saves"] == []
    assert committed["inplace_modules"]["ReLU"] == 0
    assert committed["inplace_kwarg_functionals"]["relu"] == 1


def test_inplace_tables(committed):
    methods = committed["inplace_methods"]
    assert methods["add_"] == "add" and methods["mul_"] == "mul" and methods["relu_"] == "relu"
    assert methods["zero_"] is None and methods["copy_"] is None
    for metadata_only in ("requires_grad_", "detach_", "t_"):
        assert metadata_only not in methods
    assert committed["inplace_view_methods"]["t_"] is True
    assert committed["inplace_view_methods"]["detach_"] is False
    assert committed["inplace_functions"]["relu_"] == "relu"


@pytest.mark.slow  # imports torch
def test_views(committed, torch):
    views = committed["view_methods"]
    for name in ("view", "transpose", "detach", "reshape", "expand", "select", "narrow"):
        assert name in views
    for name in ("clone", "contiguous"):
        assert name not in views
    assert "contiguous" in committed["self_returning_methods"]
    assert {"chunk", "split", "unbind"} <= set(committed["multi_view_methods"])
    assert {"T", "mT", "data"} <= set(committed["view_attributes"])
    x = torch.rand(3, 4)
    assert x.transpose(0, 1)._base is x and x.clone()._base is None


def test_namespace_tables(committed):
    assert {"add", "mul", "matmul"} <= set(committed["out_functions"])
    assert {"zeros", "ones", "tensor", "arange", "randn", "matmul"} <= set(committed["tensor_functions"])


@pytest.mark.slow  # imports torch
@pytest.mark.parametrize(("name", "saves"), [("ELU", ["result"]), ("Hardswish", []), ("ReLU", ["result"])])
def test_inplace_modules_save_what_backward_checks(committed, torch, name, saves):
    """In place, ELU saves the tensor it overwrote (out of place: its input); Hardswish a clone."""
    assert committed["inplace_module_saves"][name] == saves
    x = torch.rand(2, 4, requires_grad=True)
    y = getattr(torch.nn, name)(inplace=True)(x * 1)
    y.mul_(2)
    if saves:
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()
    else:
        y.sum().backward()


def test_inplace_function_saves(committed):
    saves = committed["inplace_function_saves"]
    assert saves["relu_"] == saves["elu_"] == saves["leaky_relu_"] == ["result"]
    assert saves["hardtanh_"] == saves["sin_"] == []
    assert saves["elu"] == saves["relu"] == ["result"]  # F.elu(x, inplace=True)
    assert saves["hardswish"] == saves["silu"] == []
    assert set(saves) == set(committed["inplace_functions"]) | set(committed["inplace_kwarg_functionals"])
    assert set(committed["inplace_module_saves"]) == set(committed["inplace_modules"])
