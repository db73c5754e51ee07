"""Autograd's refusals at the write, explained by the tracer when the traced block exits: each kind
with its line, tensor, reason and fix; anything else passes through untouched. Also where the
in-place modules were built, which both explanations name."""

from __future__ import annotations

import inspect
import os

import pytest

pytestmark = pytest.mark.slow  # runs torch

torch = pytest.importorskip("torch")

from conftest import source_line  # noqa: E402
from torch import nn  # noqa: E402

from torchlint_inplace.runtime import InplaceCulpritError, InplaceRefusalError, trace  # noqa: E402


def _refusal(run) -> InplaceRefusalError:
    with pytest.raises(InplaceRefusalError) as caught, trace():
        run()
    return caught.value


def leaf_update() -> None:
    weight = nn.Parameter(torch.ones(3))
    weight.add_(1.0)


def leaf_view_write() -> None:
    x = torch.zeros(4, requires_grad=True)
    x[0] = 1.0


def chunk_write() -> None:
    x = torch.randn(4, 3, requires_grad=True) * 2
    first, second = x.chunk(2)
    second.mul_(2.0)


def no_grad_view_write() -> None:
    x = torch.randn(4, requires_grad=True) * 2
    with torch.no_grad():
        head = x[:2]
    head.zero_()


def inference_write() -> None:
    with torch.inference_mode():
        cached = torch.ones(3)
    cached.add_(1.0)


def transposed_operand() -> None:
    x = torch.randn(3, 3)
    x.add_(x.t())


def functional_on_a_leaf() -> None:
    x = torch.randn(3, requires_grad=True)
    torch.nn.functional.relu(x, inplace=True)


@pytest.mark.parametrize(
    ("run", "key", "write", "name", "rule", "words"),
    [
        (leaf_update, "leaf", "weight.add_(1.0)", "weight", "TIP001", "an nn.Parameter"),
        (leaf_view_write, "view-of-leaf", "x[0] = 1.0", "x", "TIP002", "made with requires_grad=True"),
        (chunk_write, "multiple-views", "second.mul_(2.0)", "second", "TIP001", "`split`/`chunk`/`unbind`"),
        (no_grad_view_write, "no-grad-view", "head.zero_()", "head", "TIP001", "under `torch.no_grad()`"),
        (inference_write, "inference-tensor", "cached.add_(1.0)", "cached", "TIP001", "torch.inference_mode()"),
        (transposed_operand, "overlapping-operand", "x.add_(x.t())", "x", "TIP001", "order"),
        (
            functional_on_a_leaf,
            "leaf",
            "torch.nn.functional.relu(x, inplace=True)",
            "x",
            "TIP004",
            "made with requires_grad=True",
        ),
    ],
    ids=lambda value: value.__name__ if callable(value) else None,
)
def test_refusal_names_the_line_the_tensor_why_and_the_fix(
    run, key: str, write: str, name: str, rule: str, words: str
) -> None:
    error = _refusal(run)
    assert error.refusal.key == key and error.rule == rule
    assert error.write.line == source_line(run, write) == error.culprit.line and error.write.function == run.__name__
    assert error.name == name and error.tensor is not None
    assert words in error.why and error.fix
    message = str(error)
    assert message.startswith(error.autograd_message) and f"test_runtime_refusals.py:{error.write.line}" in message
    assert "Traceback" not in message and os.path.dirname(torch.__file__) not in message


def test_multi_output_views_name_the_line_that_made_them() -> None:
    error = _refusal(chunk_write)
    [made] = [related for related in error.related if related.role == "the views were made"]
    assert made.site.line == source_line(chunk_write, "first, second = x.chunk(2)")


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        return x

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        return grad


class MarkUnreturned(Scale):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        ctx.mark_dirty(x)
        return x * 2


def test_custom_function_faults_name_the_functions_line_as_culprit() -> None:
    def returned_as_is() -> None:
        out = Scale.apply(torch.randn(3, requires_grad=True) * 1.0)
        out.mul_(2.0)

    error = _refusal(returned_as_is)
    assert (error.refusal.key, error.rule) == ("custom-function-view", "TIP005")
    assert error.write.line == source_line(returned_as_is, "out.mul_(2.0)")
    assert (
        error.culprit.line == source_line(Scale.forward, "return x")
        and "returned its input as is" in error.related[0].role
    )
    error = _refusal(lambda: MarkUnreturned.apply(torch.randn(3, requires_grad=True) * 1.0))
    assert error.refusal.key == "dirty-not-returned" and error.culprit.line == source_line(
        MarkUnreturned.forward, "ctx.mark_dirty(x)"
    )


class HookedNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Linear(3, 3)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.conv(x))


def test_inplace_module_after_a_full_backward_hook_names_the_input_and_the_build_line() -> None:
    def run() -> None:
        net = HookedNet()
        net.conv.register_full_backward_hook(lambda module, grad_in, grad_out: None)
        net(torch.randn(2, 3, requires_grad=True))

    error = _refusal(run)
    assert (error.refusal.key, error.rule, error.op, error.name) == (
        "backward-hook-view",
        "TIP004",
        "relu_",
        "self.conv(x)",
    )
    assert error.write.line == source_line(HookedNet.forward, "return self.act(self.conv(x))")
    assert error.built.role == "the in-place `ReLU` was built"
    assert error.built.site.line == source_line(HookedNet.__init__, "self.act = nn.ReLU(inplace=True)")


def test_other_errors_pass_through_unchanged_and_a_caught_refusal_is_left_alone() -> None:
    problem = RuntimeError("shape mismatch")
    with pytest.raises(RuntimeError) as caught, trace():
        raise problem
    assert caught.value is problem
    with trace():
        with pytest.raises(RuntimeError, match="a leaf Variable"):
            leaf_update()


def test_refusal_keeps_the_traceback_and_is_data() -> None:
    error = _refusal(leaf_view_write)
    frames = [frame for frame in inspect.getinnerframes(error.__traceback__) if frame.filename == __file__]
    assert frames[-1].lineno == source_line(leaf_view_write, "x[0] = 1.0")
    data = error.to_dict()
    assert data["kind"] == "refused-view-of-leaf" and data["rule"] == "TIP002" and data["at_write"] is True
    assert data["mutation"]["code"] == data["refused"]["code"] == "x[0] = 1.0" and data["tensor"]["name"] == "x"


class DoubleRelu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act(self.fc(x))
        return self.act(h)


def test_culprit_write_by_an_inplace_module_names_its_build_line_only_if_seen_built() -> None:
    with pytest.raises(InplaceCulpritError) as caught, trace():
        DoubleRelu()(torch.randn(2, 3)).sum().backward()
    write = caught.value.writes[-1]
    assert write.line == source_line(DoubleRelu.forward, "return self.act(h)")
    assert write.built.site.line == source_line(DoubleRelu.__init__, "self.act = nn.ReLU(inplace=True)")
    assert f"the in-place `ReLU` was built at tests/test_runtime_refusals.py:{write.built.site.line}" in str(
        caught.value
    )
    model = DoubleRelu()
    with pytest.raises(InplaceCulpritError) as caught, trace():
        model(torch.randn(2, 3)).sum().backward()
    assert caught.value.writes[-1].built is None


class MadeInPlace(DoubleRelu):
    def __init__(self) -> None:
        super().__init__()
        self.act = nn.ReLU()
        for module in self.modules():
            if isinstance(module, nn.ReLU):
                module.inplace = True


def test_a_module_made_in_place_after_it_was_built_names_that_line() -> None:
    with pytest.raises(InplaceCulpritError) as caught, trace():
        MadeInPlace()(torch.randn(2, 3)).sum().backward()
    built = caught.value.writes[-1].built
    assert built.role == "`inplace = True` was set on the `ReLU`"
    assert built.site.line == source_line(MadeInPlace.__init__, "module.inplace = True")


def test_module_init_and_setattr_are_restored_after_tracing_even_nested() -> None:
    originals = (nn.Module.__init__, nn.Module.__setattr__)
    with trace():
        with trace():
            assert (nn.Module.__init__, nn.Module.__setattr__) != originals
        assert nn.Module.__init__ is not originals[0]
    assert (nn.Module.__init__, nn.Module.__setattr__) == originals
