"""Stand-in rules for the engine's tests, so they do not depend on what the real analysis finds.

A fake rule reports every line that calls its trigger (`mutate(`, `other(`, `preview(`), with
a safe or an unsafe fix when the line ends in `# fix: safe` or `# fix: unsafe`; the
real analysis is replaced by a stub so that only the engine (discovery, config, noqa, linting,
CLI) is under test.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from torchlint_inplace import analysis, registry
from torchlint_inplace.analysis.model import FileAnalysis
from torchlint_inplace.diagnostics import Applicability, Edit, Finding, Fix, Position, Severity, Span
from torchlint_inplace.rule import Rule


class _LineRule(Rule):
    trigger = ""
    summary = "calls the trigger"
    why = "the test says so"
    bad = "mutate(x)\n"
    good = "keep(x)\n"
    fix_doc = "none"

    def check(self, file_analysis: FileAnalysis) -> Iterator[Finding]:
        for number, line in enumerate(file_analysis.module.code.splitlines(), start=1):
            column = line.find(self.trigger + "(")
            if column >= 0:
                span = Span(Position(number, column), Position(number, column + len(self.trigger)))
                fix = next(
                    (
                        Fix("rename it", (Edit(span, "fixed"),), kind)
                        for kind in Applicability
                        if line.endswith(f"# fix: {kind.value}")
                    ),
                    None,
                )
                yield Finding(
                    file_analysis.path,
                    self.code,
                    self.name,
                    f"`{self.trigger}` called",
                    Severity.ERROR,
                    span,
                    "raises at backward",
                    fix=fix,
                )


class Mutate(_LineRule):
    code, name, trigger = "TIP001", "fake-mutate", "mutate"


class Other(_LineRule):
    code, name, trigger = "TIP003", "fake-other", "other"


class Preview(_LineRule):
    code, name, trigger = "TIP009", "fake-preview", "preview"
    default_enabled = False


FAKE_RULES = (Mutate, Other, Preview)


@pytest.fixture
def fake_rules(monkeypatch: pytest.MonkeyPatch) -> tuple[type[Rule], ...]:
    monkeypatch.setattr(registry, "all_rules", lambda: FAKE_RULES)
    monkeypatch.setattr(
        analysis, "analyze", lambda module, path, project=None, preview=False: FileAnalysis(path=path, module=module)
    )
    return FAKE_RULES
