"""`model.named_modules()` and `model.named_children()` as the analysis answers them: each
module once, under the dotted name torch gives it (`dict(model.named_modules())["features.1"]`
is that layer and no other); children are the direct ones only. End to end, through the hook a
recorder puts on the layer it looked up."""

from __future__ import annotations

import pytest

from torchlint_inplace.api import lint_source

MODEL = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(inplace=True))
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.features(x).mean(dim=(2, 3)))


def run():
    model = Net()
    layer = dict(model.{method}())["{name}"]
    layer.register_full_backward_hook(lambda module, grad_in, grad_out: None)
    model(torch.randn(1, 3, 5, 5))
"""
RELU_LINE = 9


@pytest.mark.parametrize(
    ("method", "name", "flagged"),
    [
        ("named_modules", "features.1", True),  # the inplace ReLU itself: its input is a hooked view
        ("named_modules", "features.0", True),  # the conv before it: its output is
        ("named_modules", "head", False),  # a layer whose tensors nobody writes
        ("named_modules", "features", False),  # the Sequential: the ReLU writes inside it, not its input or output
        ("named_children", "features", False),
        ("named_children", "features.1", False),  # not a child: the lookup finds nothing to hook
    ],
)
def test_a_layer_looked_up_by_name_is_the_one_hooked(method: str, name: str, flagged: bool) -> None:
    found = lint_source(MODEL.format(method=method, name=name), "net.py")
    assert [(finding.code, finding.span.start.line) for finding in found] == (
        [("TIP004", RELU_LINE)] if flagged else []
    )
