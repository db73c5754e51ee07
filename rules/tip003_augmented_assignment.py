from torchlint_inplace.analysis.model import FileAnalysis, Form, Mutation
from torchlint_inplace.diagnostics import Fix
from torchlint_inplace.fixes import builders
from torchlint_inplace.rule import FormRule


class AugmentedAssignment(FormRule):
    code = "TIP003"
    name = "augmented-assignment-on-saved-tensor"
    form = Form.AUG_ASSIGN
    summary = "Augmented assignment (`x += y`, `x *= y`, `x /= 2`, ...) on a tensor writes in place into a tensor autograd saved for backward, or into a leaf that requires grad."
    why = (
        "For tensors `x += y` is `x.add_(y)`, not `x = x + y`: it writes into `x`'s storage and bumps the "
        "version counter. When an earlier op saved `x` for backward (`z = x * w` saves `x` to compute "
        "`w`'s gradient; `x = torch.exp(a)` saves its result), `backward()` raises 'one of the variables "
        "needed for gradient computation has been modified by an inplace operation'. On Python numbers "
        "`+=` just rebinds, which is why the same line looks harmless."
    )
    bad = """\
import torch
from torch import nn


class Shift(nn.Module):
    def forward(self, x):
        h = torch.tanh(x)   # tanh saves its result h
        h += 1              # TIP003: backward() will raise
        return h
"""
    good = """\
import torch
from torch import nn


class Shift(nn.Module):
    def forward(self, x):
        h = torch.tanh(x)
        h = h + 1           # a new tensor; the saved h is untouched
        return h
"""
    fix_doc = "Rewrites `x op= y` to `x = x op y`. Unsafe when `x` has other aliases, is an argument or an attribute: they would no longer see the update."
    fix_brief = "`x += y` -> `x = x + y`"
    brief = "augmented assignment on a tensor (`x += y` is in place)"

    def fix(self, mutation: Mutation, analysis: FileAnalysis) -> Fix | None:
        return builders.augmented_assignment(mutation, analysis)
