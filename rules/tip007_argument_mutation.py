from torchlint_inplace.analysis.model import FileAnalysis, Form, Mutation
from torchlint_inplace.diagnostics import Fix
from torchlint_inplace.fixes import builders
from torchlint_inplace.rule import FormRule


class ArgumentMutation(FormRule):
    code = "TIP007"
    name = "mutates-caller-tensor"
    form = Form.ARGUMENT
    summary = "A `forward` or helper writes in place into a tensor argument its caller still needs: the caller saved it for backward or reads it again."
    why = (
        "The tensor belongs to the caller. When `A.forward` computes `y = x * w` (saving `x`) and then calls "
        "`self.b(x)` whose `forward` does `x.clamp_()`, backward() raises and the traceback points at neither; when "
        "the caller reads `x` again after the call (a skip connection), it silently sees the modified values. The "
        "finding is on the write inside the callee, with the caller's line as the reason. A method's write into "
        "a tensor its object holds (MoCo's `self._dequeue_and_enqueue(k)` writing `self.queue` after `forward` "
        "multiplied by it) is its caller's write into that attribute; so is a layer's forward redrawing a buffer in "
        "place (a noisy layer's `self.epsilon_weight.normal_()`) that its previous call saved, when the caller "
        "runs the network twice before backward."
    )
    bad = """\
import torch
from torch import nn


class Clip(nn.Module):
    def forward(self, x):
        x.clamp_(-1, 1)          # TIP007: writes the caller's tensor
        return x


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.clip = Clip()

    def forward(self, x):
        h = torch.sigmoid(x)     # sigmoid saves its result h
        return self.clip(h)
"""
    good = """\
import torch
from torch import nn


class Clip(nn.Module):
    def forward(self, x):
        x = x.clone()            # write this module's own copy
        x.clamp_(-1, 1)
        return x


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.clip = Clip()

    def forward(self, x):
        h = torch.sigmoid(x)
        return self.clip(h)
"""
    fix_doc = "Inserts `x = x.clone()` at the top of the callee. Unsafe: a caller that relied on the in-place update no longer sees it."
    fix_brief = "`x = x.clone()` first in the callee (unsafe: the caller no longer sees the write)"
    brief = "a `forward` (or helper) mutating a tensor argument it does not own"

    def fix(self, mutation: Mutation, analysis: FileAnalysis) -> Fix | None:
        return builders.argument_write(mutation, analysis)
