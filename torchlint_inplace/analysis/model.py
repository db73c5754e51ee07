"""What the shared analysis hands to rules: in-place mutation events, each with its hazard."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property

import libcst as cst

from ..diagnostics import Related, Span
from .conditions import Condition, against_defaults, phrases, wording


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


@dataclass(frozen=True, slots=True)
class Reason:
    """Why a write breaks, in words: the clause after "but" (naming the op that saved the tensor
    and its line, or the other reader), the short outcome ("raises at backward", ...), notes
    pointing at the other lines involved, and advice."""

    text: str
    consequence: str
    related: tuple[Related, ...] = ()
    help: str = ""


@dataclass(frozen=True, eq=False)
class Mutation:
    """One in-place write the analysis can explain.

    Where it is (`span`) and why it breaks (`reason`) are computed when first read: only the
    mutations a rule reports pay for LibCST's positions, which cost more than the parse."""

    form: Form
    node: cst.CSTNode
    action: str  # what is written, as the message starts: "`h.mul_()` modifies `h` in place"
    locate: Callable[[], Span] = field(repr=False)
    explain: Callable[[], Reason] = field(repr=False)
    certain: bool = True  # False: real in-place write whose consequence cannot be proven (preview)
    # For the fixer: the expression written in place (`x` in `x.add_(1)`, `x[i] = v`, `x += 1`,
    # `self.act(x)`), and whether it is a plain local name no other live name aliases, so that
    # rebinding it cannot change what any other reader or caller observes (a safe fix).
    target: cst.CSTNode | None = None
    exclusive: bool = False
    # Written through a view of a tensor another live name holds (`v = out[1:]; v.add_(1)`):
    # the write is how `out` changes, so rebinding or cloning `v` would be wrong (no fix).
    through_view: bool = False
    # Which breach of a custom Function's contract (TIP005): "unmarked-write", "saved-then-written",
    # "dirty-not-written", "dirty-not-returned", "dirty-neither"; empty for other forms.
    kind: str = ""
    path: str = ""  # the file `node` lives in
    silent: bool = False  # it changes values without an error (a later read, a `.data` write)
    # What must hold for the write to do harm (a configuration, the mode, a branch taken).
    condition: Condition = frozenset()
    # Where an in-place module built here ran (`self.act(h)`), when the finding is on the line
    # that built it (positions are computed only for reported findings); and the literal
    # `True` a fix switches off.
    calls: tuple[Callable[[], Related], ...] = ()
    flag: cst.CSTNode | None = None
    # `y.mul_(2).add_(1)`: the outermost in-place call of a chain on one tensor, one finding.
    chain: cst.CSTNode | None = None

    @cached_property
    def span(self) -> Span:
        return self.locate()

    @cached_property
    def reason(self) -> Reason:
        return self.explain()

    @property
    def message(self) -> str:
        when = wording(self.condition)
        return f"{self.action}, but {self.reason.text}" + (f"; only {when}" if when else "")

    @property
    def consequence(self) -> str:
        when = wording(self.condition)
        return f"{self.reason.consequence} ({when})" if when else self.reason.consequence

    @property
    def conditions(self) -> list[str]:
        return phrases(self.condition)

    @property
    def conditional(self) -> bool:
        """Unreachable in the configuration's defaults: reported as a warning."""
        return against_defaults(self.condition)

    @property
    def related(self) -> tuple[Related, ...]:
        return tuple(related() for related in self.calls) + self.reason.related

    @property
    def help(self) -> str:
        return self.reason.help


@dataclass(slots=True)
class FileAnalysis:
    path: str
    module: cst.Module
    mutations: list[Mutation] = field(default_factory=list)
    preview: bool = False  # also report findings whose consequence cannot be proven
    # Other files the result depends on (callee summaries, callers), and package roots whose
    # set of files was scanned for callers: a results cache must key on both.
    dependencies: frozenset[str] = frozenset()
    scanned_roots: frozenset[str] = frozenset()
    # Whether rules build each finding's fix. An editor publishes findings without them (the
    # fix builders' index of the module costs more than the analysis) and asks for them, with
    # `replace(analysis, fixes=True)`, only when a code action is requested.
    fixes: bool = True

    def of_form(self, form: Form) -> list[Mutation]:
        return [m for m in self.mutations if m.form is form]
