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
        "(a residual `identity = x; out = relu(x); out + identity` silently adds the rectified tensor, or a forward "
        "hook kept the layer's output in a dict, a list or an attribute of a hook object, read after the forward), "
        "or when the same inplace module is applied twice to one tensor. The finding points at where the module was made "
        "in place (the `inplace=True` a user edits, wherever construction code put it), with the call that ran "
        "it as a related location; a functional's is its call."
    )
    bad = """\
import torch
from torch import nn


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.act = nn.ReLU(inplace=True)   # TIP004: forward's self.act(x) rewrites x, which the residual reads

    def forward(self, x):
        out = self.fc(self.act(x))
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
    fix_doc = "Switches to the out-of-place form: the literal `inplace=True` the module was built with (in `__init__`, a factory, a `partial`, a config dict, or `m.inplace = True`) becomes `False`, `F.relu(x)` loses the flag, `x = torch.relu(x)` replaces `torch.relu_(x)`. Unsafe: later readers of the input, and other call sites of a shared module, see it un-activated (usually the point); costs one activation's memory. No fix when the flag is not a literal (`act_layer(inplace=inplace)` with a default): the finding then points at the call that built the module."
    fix_brief = "the literal `inplace=True` the module was built with becomes `False`; `F.relu(x)` without the flag; `torch.relu_(x)` -> `x = torch.relu(x)` (always unsafe: later readers of `x` see it un-activated, which is usually the point)"
    brief = "`inplace=True` module or functional whose input is saved or still read elsewhere"

    def fix(self, mutation: Mutation, analysis: FileAnalysis) -> Fix | None:
        return builders.inplace_activation(mutation, analysis)
