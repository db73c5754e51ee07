from torchlint_inplace.analysis.model import FileAnalysis, Form, Mutation
from torchlint_inplace.diagnostics import Fix
from torchlint_inplace.fixes import builders
from torchlint_inplace.rule import FormRule


class OutArgument(FormRule):
    code = "TIP006"
    name = "out-argument-into-saved-tensor"
    form = Form.OUT_ARGUMENT
    summary = "`out=` writes an op's result into a tensor that autograd saved for backward (a cache, a buffer, a running statistic)."
    why = (
        "`torch.cos(a, out=buf)` writes into `buf` in place and bumps its version counter, even under "
        "`torch.no_grad()`. If `x * buf` saved `buf` for backward earlier, backward() raises 'one of the variables "
        "needed for gradient computation has been modified by an inplace operation'. Refreshing a cache after using "
        "it in the same forward is the usual shape."
    )
    bad = """\
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self):
        super().__init__()
        self.freqs = nn.Parameter(torch.ones(8))
        self.register_buffer("cos_cached", torch.ones(8))

    def forward(self, x, t):
        y = x * self.cos_cached                         # mul saves the cache
        torch.cos(self.freqs * t, out=self.cos_cached)  # TIP006: backward() will raise
        return y
"""
    good = """\
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self):
        super().__init__()
        self.freqs = nn.Parameter(torch.ones(8))
        self.register_buffer("cos_cached", torch.ones(8))

    def forward(self, x, t):
        y = x * self.cos_cached
        self.cos_cached = torch.cos(self.freqs * t)   # a new tensor; the saved one is intact
        return y
"""
    fix_doc = "Rewrites `f(..., out=t)` to `t = f(...)`. Unsafe when `t` is an attribute or has other aliases that relied on the shared buffer."
    fix_brief = (
        "`f(a, out=t)` -> `t = f(a)` (unsafe for attributes: whoever kept the old buffer no longer sees updates)"
    )
    brief = "`out=` writing into a needed tensor"

    def fix(self, mutation: Mutation, analysis: FileAnalysis) -> Fix | None:
        return builders.out_argument(mutation, analysis)
