"""What the shared analysis hands to rules: in-place mutation events, each with its hazard."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import libcst as cst

from ..diagnostics import Fix, Related, Span


class Form(str, Enum):
    """How the mutation is written: the rules are organised by form, as users review code."""

    METHOD = "method"  # TIP001 x.add_(y)
    INDEX_ASSIGN = "index-assign"  # TIP002 x[i] = v, x[i] += v
    AUG_ASSIGN = "aug-assign"  # TIP003 x += y
    INPLACE_ACTIVATION = "inplace-activation"  # TIP004 nn.ReLU(inplace=True), F.relu(x, inplace=True)
    AUTOGRAD_FUNCTION = "autograd-function"  # TIP005
    OUT_ARGUMENT = "out-argument"  # TIP006 torch.mul(a, b, out=c)
    ARGUMENT = "argument"  # TIP007 mutating a caller's tensor
    HIDDEN = "hidden"  # TIP008 through .data / .detach()
    OPTIMIZER_STEP = "optimizer-step"  # TIP009


@dataclass(frozen=True)
class Mutation:
    """One in-place write the analysis can explain.

    `message` says what is written and why it breaks, naming the saving op and its line or the
    other reader; `consequence` is the short outcome ("raises at backward", ...).
    """

    form: Form
    node: cst.CSTNode = field(compare=False, hash=False)
    span: Span
    message: str
    consequence: str
    related: tuple[Related, ...] = ()
    help: str = ""
    fix: Fix | None = None
    certain: bool = True  # False: real in-place write whose consequence cannot be proven (preview)
    # For the fixer: the expression written in place (`x` in `x.add_(1)`, `x[i] = v`, `x += 1`,
    # `self.act(x)`), and whether it is a plain local name no other live name aliases, so that
    # rebinding it cannot change what any other reader or caller observes (a safe fix).
    target: cst.CSTNode | None = field(default=None, compare=False, hash=False)
    exclusive: bool = False
    # Which breach of a custom Function's contract (TIP005): "unmarked-write", "saved-then-written",
    # "dirty-not-written", "dirty-not-returned", "dirty-neither"; empty for other forms.
    kind: str = ""


@dataclass
class FileAnalysis:
    path: str
    module: cst.Module
    mutations: list[Mutation] = field(default_factory=list)
    preview: bool = False  # also report findings whose consequence cannot be proven
    # Other files the result depends on (callee summaries, callers), and package roots whose
    # set of files was scanned for callers: a results cache must key on both.
    dependencies: frozenset[str] = frozenset()
    scanned_roots: frozenset[str] = frozenset()

    def of_form(self, form: Form) -> list[Mutation]:
        return [m for m in self.mutations if m.form is form]
