"""The contract between the engine and a rule in the catalogue.

A rule is a small class: its documentation (what it flags, why autograd breaks, a bad and a
good example, what its fix does) and a `check` that turns the shared analysis' mutation events
of one form into findings. The hard work lives in the analysis, so rules stay short.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, ClassVar

from .diagnostics import Finding, Fix, Severity
from .recursion import deep_recursion

if TYPE_CHECKING:
    from .analysis.model import FileAnalysis, Form, Mutation


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]  # one line: what it flags
    why: ClassVar[str]  # why it breaks autograd or corrupts values
    bad: ClassVar[str]  # example that is flagged
    good: ClassVar[str]  # the same code, fixed
    fix_doc: ClassVar[str]  # what the fix does and when it is safe
    severity: ClassVar[Severity] = Severity.ERROR
    default_enabled: ClassVar[bool] = True

    def check(self, analysis: "FileAnalysis") -> Iterator[Finding]:
        raise NotImplementedError


class FormRule(Rule):
    """A rule that reports the shared analysis' certain mutation events of one form."""

    form: ClassVar["Form"]

    def check(self, analysis: "FileAnalysis") -> Iterator[Finding]:
        for mutation in analysis.of_form(self.form):
            if mutation.certain or analysis.preview:
                with deep_recursion():  # wording and fixing a finding walk the whole tree
                    finding = Finding(
                        path=analysis.path,
                        code=self.code,
                        name=self.name,
                        message=mutation.message,
                        severity=self.severity,
                        span=mutation.span,
                        consequence=mutation.consequence,
                        related=mutation.related,
                        help=mutation.help,
                        fix=self.fix(mutation, analysis),
                    )
                yield finding

    def fix(self, mutation: "Mutation", analysis: "FileAnalysis") -> Fix | None:
        """The rewrite for one event (built by `torchlint_inplace.fixes.builders`); None: no fix."""
        return None
