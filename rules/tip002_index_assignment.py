from torchlint_inplace.analysis.model import FileAnalysis, Form, Mutation
from torchlint_inplace.diagnostics import Fix
from torchlint_inplace.fixes import builders
from torchlint_inplace.rule import FormRule


class IndexAssignment(FormRule):
    code = "TIP002"
    name = "index-assignment-on-saved-tensor"
    form = Form.INDEX_ASSIGN
    summary = "Index or slice assignment (`x[i] = v`, `x[..., 0] = 0`, `x[mask] += v`) writes into a tensor autograd saved for backward, or into a leaf that requires grad."
    why = (
        "`x[idx] = v` is `x.__setitem__`, an in-place `copy_`/`index_put_` on `x`'s storage: it bumps the "
        "version counter shared by `x` and all its views. If an earlier op saved `x` (or a view of it) "
        "for backward, `backward()` raises 'one of the variables needed for gradient computation has "
        "been modified by an inplace operation'. This is the most common shape of the bug: a mask or a "
        "buffer used in a product and then updated in place. Integer tensors count too: an `nn.Embedding` "
        "keeps the token ids it looked up for its weight's gradient, so writing predicted tokens into them "
        "before backward raises."
    )
    bad = """\
import torch
from torch import nn


class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.x = nn.Parameter(torch.ones(1))

    def forward(self):
        t = torch.tensor([2.0])
        y = self.x * t     # mul saves t: d(y)/d(self.x) = t
        t[:] = 3.0         # TIP002: backward() will raise
        return y
"""
    good = """\
import torch
from torch import nn


class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.x = nn.Parameter(torch.ones(1))

    def forward(self):
        t = torch.tensor([2.0])
        y = self.x * t
        t = t.clone()      # write into a copy; the saved t keeps its version
        t[:] = 3.0
        return y
"""
    fix_doc = "Inserts `x = x.clone()` right before the assignment, so the write goes into a copy and the saved tensor keeps its version. No fix when the assigned value itself saved `x` (`x[:, :c] = conv(x[:, :c])`: the clone would be saved and written). Unsafe when `x` has other aliases, is an argument or an attribute: they no longer see the write."
    fix_brief = "`x[i] = v` -> `x = x.clone()` inserted before"
    brief = "index / slice assignment on a tensor (`x[i] = v`, `x[m] += v`)"

    def fix(self, mutation: Mutation, analysis: FileAnalysis) -> Fix | None:
        return builders.index_assignment(mutation, analysis)
