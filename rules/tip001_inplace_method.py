from torchlint_inplace.analysis.model import FileAnalysis, Form, Mutation
from torchlint_inplace.diagnostics import Fix
from torchlint_inplace.fixes import builders
from torchlint_inplace.rule import FormRule


class InplaceMethod(FormRule):
    code = "TIP001"
    name = "inplace-method-on-saved-tensor"
    form = Form.METHOD
    summary = "A trailing-underscore tensor method (`add_`, `mul_`, `clamp_`, `masked_fill_`, `copy_`, `zero_`, ...) writes into a tensor autograd saved for backward, or into a leaf that requires grad."
    why = (
        "Every tensor carries a version counter shared by all views of its storage; each in-place "
        "method bumps it. Ops such as `*`, `matmul`, `div`, `pow` save their operands for backward and "
        "`sigmoid`, `tanh`, `relu`, `exp`, `softmax` save their result; autograd records the version "
        "when it saves and compares at backward. If the saved tensor was written in between, "
        "`backward()` raises 'one of the variables needed for gradient computation has been modified "
        "by an inplace operation', pointing at `backward()` instead of the culprit. Writing in place "
        "into a leaf that requires grad (an `nn.Parameter`) raises at once. In-place methods on "
        "tensors nobody saved are fine and are not reported."
    )
    bad = """\
import torch
from torch import nn


class Gate(nn.Module):
    def forward(self, x):
        y = torch.sigmoid(x)   # sigmoid saves its result y
        y.mul_(2)              # TIP001: backward() will raise
        return y
"""
    good = """\
import torch
from torch import nn


class Gate(nn.Module):
    def forward(self, x):
        y = torch.sigmoid(x)
        y = y.mul(2)           # out of place: the saved y is untouched
        return y
"""
    fix_doc = "Rewrites `x.op_(...)` used as a statement to `x = x.op(...)` (the out-of-place twin, derived from torch). Unsafe when `x` has other aliases, is an argument or an attribute: their readers would no longer see the write."
    fix_brief = "`x.add_(y)` -> `x = x.add(y)` (the out-of-place twin, from the torch table); `zero_` -> `torch.zeros_like(x)`, `fill_(v)` -> `torch.full_like(x, v)`, others (`copy_`, `uniform_`) -> `x = x.clone().copy_(y)`; used as a value: `(x := x.add(y))`"
    brief = "trailing-underscore tensor method (`add_`, `mul_`, `clamp_`, `masked_fill_`, `copy_`, `zero_`, ...)"

    def fix(self, mutation: Mutation, analysis: FileAnalysis) -> Fix | None:
        return builders.method_call(mutation, analysis)
