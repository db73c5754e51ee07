from torchlint_inplace.analysis.model import Form
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
        "buffer used in a product and then updated in place."
    )
    bad = """\
def forward(self):
    t = torch.tensor([2.0])
    y = self.x * t     # mul saves t: d(y)/d(self.x) = t
    t[:] = 3.0         # TIP002: backward() will raise
    return y
"""
    good = """\
def forward(self):
    t = torch.tensor([2.0])
    y = self.x * t
    t = t.clone()      # write into a copy; the saved t keeps its version
    t[:] = 3.0
    return y
"""
    fix_doc = "Inserts `x = x.clone()` right before the assignment (or uses `masked_fill`/`torch.where` where provably equivalent). Unsafe when `x` has other aliases, is an argument or an attribute."

    def fix(self, mutation, analysis):
        return builders.index_assignment(mutation, analysis)
