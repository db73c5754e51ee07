from torchlint_inplace.analysis.model import FileAnalysis, Form, Mutation
from torchlint_inplace.diagnostics import Fix
from torchlint_inplace.fixes import builders
from torchlint_inplace.rule import FormRule


class AutogradFunctionContract(FormRule):
    code = "TIP005"
    name = "autograd-function-dirty-contract"
    form = Form.AUTOGRAD_FUNCTION
    summary = "A custom `torch.autograd.Function.forward` writes an input without `ctx.mark_dirty`, marks dirty a tensor it neither wrote nor returned, or writes a tensor it saved for backward."
    why = (
        "`forward` runs with grad mode off, but an in-place write still bumps the input's version counter and "
        "changes the caller's tensor. `ctx.mark_dirty(x)` (with `x` returned) tells autograd the output aliases a "
        "modified input; without it, anything that saved the input raises at backward and other readers silently "
        "see new values. Marking a tensor that is not returned raises at once; writing a tensor after "
        "`ctx.save_for_backward` makes backward read the modified values."
    )
    bad = """\
import torch


class ClampMin(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.clamp_(min=0)          # TIP005: no ctx.mark_dirty(x)
        return x
"""
    good = """\
import torch


class ClampMin(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.clamp_(min=0)
        ctx.mark_dirty(x)
        return x
"""
    fix_doc = "Writes into `x = x.clone()` inserted before the write (and removes its `ctx.mark_dirty(x)`): unsafe, callers no longer see the write. `ctx.mark_dirty` alone is not offered: the caller's tensor would still change, and a caller that saved it would still raise. A `mark_dirty` of a tensor neither written nor returned is removed (safe)."
    fix_brief = "`x = x.clone()` before `forward` writes its input (and its `ctx.mark_dirty(x)` removed); a `mark_dirty` of a tensor neither written nor returned is removed"
    brief = "custom `autograd.Function` mutating inputs without `ctx.mark_dirty`, or marking wrongly"

    def fix(self, mutation: Mutation, analysis: FileAnalysis) -> Fix | None:
        return builders.autograd_function(mutation, analysis)
