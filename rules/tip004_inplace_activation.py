from torchlint_inplace.analysis.model import FileAnalysis, Form, Mutation
from torchlint_inplace.diagnostics import Fix
from torchlint_inplace.fixes import builders
from torchlint_inplace.rule import FormRule


class InplaceActivation(FormRule):
    code = "TIP004"
    name = "inplace-activation-on-needed-tensor"
    form = Form.INPLACE_ACTIVATION
    summary = "An `inplace=True` module or functional (`nn.ReLU(inplace=True)`, `F.relu(x, inplace=True)`, `F.dropout(..., inplace=True)`, `torch.relu_`) rewrites a tensor that was saved for backward or is still read elsewhere."
    why = (
        "An inplace activation overwrites its input. That is fine after `conv -> bn`, whose output nobody saved "
        "or reads again, and is why torchvision uses it. It breaks when the input was saved by the op that made it "
        "(`sigmoid`, `tanh`, another ReLU's result: backward() raises), when the same tensor is read again later "
        "(a residual `identity = x; out = relu(x); out + identity` silently adds the rectified tensor), or when the "
        "same inplace module is applied twice to one tensor."
    )
    bad = """\
import torch
from torch import nn


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        out = self.fc(self.act(x))   # TIP004: rewrites x, which the residual reads
        return out + x
"""
    good = """\
import torch
from torch import nn


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.act = nn.ReLU()         # inplace=False: x is left as it was

    def forward(self, x):
        out = self.fc(self.act(x))
        return out + x
"""
    fix_doc = "Switches to the out-of-place form: `inplace=False` where `__init__` builds the module, `F.relu(x)` without the flag, `x = torch.relu(x)` for `torch.relu_(x)`. Unsafe: later readers of the input, and other call sites of a shared module, see it un-activated (usually the point); costs one activation's memory. No fix when a helper function builds the module."
    fix_brief = "`inplace=False` where `__init__` builds the module; `F.relu(x)` without the flag; `torch.relu_(x)` -> `x = torch.relu(x)` (always unsafe: later readers of `x` see it un-activated, which is usually the point)"
    brief = "`inplace=True` module or functional whose input is saved or still read elsewhere"

    def fix(self, mutation: Mutation, analysis: FileAnalysis) -> Fix | None:
        return builders.inplace_activation(mutation, analysis)
