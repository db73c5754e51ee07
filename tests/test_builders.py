"""Entry points that only build are not run (`analysis.builders`): a model zoo's factories.

Each case is a module-level function and whether it only builds. The cases that do not are
the forms that can make a finding in the file: a write, a call of something held (a module
may run there), the file's own methods, training calls, an in-place flag. The engine test
checks that a builder is not run while a training function beside it is.
"""

from __future__ import annotations

import libcst as cst
import pytest
from support import runs_of

from torchlint_inplace import analysis
from torchlint_inplace.analysis.builders import builds_only

HEADER = """\
import math
import torch
from torch import nn
from .builder import build_model_with_cfg


class Net(nn.Module):
    def __init__(self, width=8, act="relu"):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def init_weights(self):
        nn.init.zeros_(self.fc.bias)

    def forward(self, x):
        return self.fc(x)


def _create(variant, pretrained=False, **kwargs):
    strict = kwargs.pop("pretrained_strict", True)
    model = build_model_with_cfg(Net, variant, pretrained, strict=strict, **kwargs)
    model.default_cfg = {"url": ""}
    return model


def _train_step(model, x):
    return model(x)

"""

BUILDERS = {
    "factory": "def f(pretrained=False, **kwargs):\n"
    "    args = dict(width=16, act='gelu')\n"
    "    return _create('f', pretrained, **dict(args, **kwargs))\n",
    "kwargs_and_made_dicts": "def f(**kwargs):\n"
    "    kwargs['width'] = 32\n"
    "    out = {}\n"
    "    out['a'] = 1\n"
    "    return Net(**kwargs), out\n",
    "constructions_and_arithmetic": "def f(width, depth):\n"
    "    hidden = math.ceil(width * depth)\n"
    "    return nn.Sequential(nn.Conv2d(width, hidden, 3), nn.GELU())\n",
    "bookkeeping_methods": "def f(**kwargs):\n"
    "    model = Net(width=kwargs.pop('width', 8))\n"
    "    model.load_state_dict(model.state_dict())\n"
    "    return model.eval()\n",
}

NOT_BUILDERS = {
    "calls_what_it_built": "def f():\n    model = Net()\n    return model(torch.ones(2, 8))\n",
    "calls_a_parameter": "def f(block_fn):\n    return block_fn(8)\n",
    "calls_a_call": "def f(name):\n    return getattr(nn, name)()\n",
    "calls_a_subscript": "def f(blocks, x):\n    return blocks[0](x)\n",
    "applies_a_module_attribute": "def f():\n"
    "    model = Net()\n"
    "    y = torch.ones(2, 8).sigmoid()\n"
    "    return model.fc(y)\n",
    "backward": "def f(loss):\n    loss.backward()\n",
    "optimizer_step": "def f(opt):\n    opt.step()\n",
    "inplace_method": "def f(w):\n    w.add_(1)\n",
    "inplace_torch_function": "def f(w):\n    nn.init.normal_(w)\n",
    "out_argument": "def f(a, b, c):\n    torch.add(a, b, out=c)\n",
    "subscript_store": "def f(w):\n    w[0] = 1\n",
    "augmented_assignment": "def f(w):\n    w += 1\n",
    "data_store": "def f(w, v):\n    w.data = v\n",
    "inplace_keyword": "def f():\n    return nn.ReLU(inplace=True)\n",
    "inplace_in_a_dict": "def f():\n    return Net(**{'inplace': True})\n",
    "positional_flag": "def f():\n    return nn.ReLU(True)\n",
    "a_method_of_the_file": "def f():\n    model = Net()\n    model.init_weights()\n    return model\n",
    "a_helper_that_runs_a_module": "def f():\n    return _train_step(Net(), torch.ones(2, 8))\n",
    "tensor_parameter": "def f(x: torch.Tensor):\n    return x\n",
}


def _function(code: str) -> tuple[analysis.FileContext, cst.FunctionDef]:
    project = analysis.Project()
    module = cst.parse_module(HEADER + code)
    ctx = project.context("/project/pkg/models.py", module)
    return ctx, ctx.functions["f"]


@pytest.mark.parametrize("case", sorted(BUILDERS))
def test_a_function_that_only_builds_is_a_builder(case: str) -> None:
    ctx, function = _function(BUILDERS[case])
    assert builds_only(ctx, function)


@pytest.mark.parametrize("case", sorted(NOT_BUILDERS))
def test_a_function_that_may_write_or_run_a_module_is_not_a_builder(case: str) -> None:
    ctx, function = _function(NOT_BUILDERS[case])
    assert not builds_only(ctx, function)


ZOO = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return self.fc(x)


def net_small(**kwargs):
    return Net(width=4, **kwargs)


def train():
    model = Net()
    y = model(torch.ones(2, 8)).sigmoid()
    y.mul_(2)
    y.sum().backward()
"""


def test_a_builder_is_not_run_as_an_entry_and_a_training_function_is() -> None:
    project = analysis.Project()
    module = cst.parse_module(ZOO)
    found = analysis.analyze(module, "/project/zoo.py", project)
    assert runs_of(project, "net_small", module) == 0
    assert runs_of(project, "train", module) == 1
    assert [(m.form, found.module.code_for_node(m.node)) for m in found.mutations] == [
        (analysis.Form.METHOD, "y.mul_(2)")
    ]
