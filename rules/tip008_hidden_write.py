from torchlint_inplace.analysis.model import Form
from torchlint_inplace.rule import FormRule


class HiddenWrite(FormRule):
    code = "TIP008"
    name = "write-through-data-or-detach"
    form = Form.HIDDEN
    summary = "An in-place write through `.data` or `.detach()` to a tensor autograd saved for backward."
    why = (
        "`.data` and `.detach()` alias the same storage. `.data` does not share the version counter, so autograd "
        "never learns of the write: backward() silently computes gradients from the modified values. `.detach()` "
        "does share it, so backward() raises '... modified by an inplace operation'. Either way the write hides "
        "from the reader the fact that the graph depends on those values."
    )
    bad = """\
import torch
from torch import nn


class Squash(nn.Module):
    def forward(self, x):
        s = torch.sigmoid(x)          # saves s
        s.data.clamp_(0.2, 0.8)       # TIP008: gradients silently wrong
        return s
"""
    good = """\
import torch
from torch import nn


class Squash(nn.Module):
    def forward(self, x):
        s = torch.sigmoid(x)
        s = s.clamp(0.2, 0.8)         # out of place, tracked by autograd
        return s
"""
    fix_doc = "No automatic fix: whether the gradient should see the clamp is a modelling decision."
    fix_brief = "none: whether gradients should see a `.data` write is a modelling decision"
    brief = "mutation through `.data` / `.detach()` that hides the change from autograd"
