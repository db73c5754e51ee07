"""Rules as self-checking units (as Fixit's VALID/INVALID cases): each rule's documented `bad`
example, linted on its own, gives that rule's finding on the line its comment marks, and its
`good` example gives no finding at all. Generated from the registry, so a new rule is checked
the moment it exists."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from support import every_rule

from torchlint_inplace import api, registry
from torchlint_inplace.rule import FormRule, Rule

RULES = registry.all_rules()


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """Where the example is linted: a file of its own, in no project, that need not exist."""
    return tmp_path / "example.py"


def _marked_lines(rule: type[Rule]) -> list[int]:
    """The lines of `bad` whose comment names the rule (`# TIP001: backward() will raise`)."""
    return [
        number
        for number, line in enumerate(textwrap.dedent(rule.bad).splitlines(), start=1)
        if f"# {rule.code}" in line
    ]


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.code)
def test_bad_example_gives_the_finding_on_the_marked_line(rule: type[Rule], example: Path) -> None:
    findings = api.lint_source(textwrap.dedent(rule.bad), example, every_rule())
    marked = _marked_lines(rule)
    assert marked, f"{rule.code}'s bad example marks no line with `# {rule.code}`"
    assert sorted({f.line for f in findings if f.code == rule.code}) == marked, findings


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.code)
def test_good_example_is_clean(rule: type[Rule], example: Path) -> None:
    assert api.lint_source(textwrap.dedent(rule.good), example, every_rule()) == []


FIXING = [rule for rule in RULES if issubclass(rule, FormRule) and rule.fix is not FormRule.fix]


@pytest.mark.parametrize("rule", FIXING, ids=lambda rule: rule.code)
def test_the_fix_resolves_the_bad_example(rule: type[Rule], example: Path) -> None:
    fixed = api.fix_source(textwrap.dedent(rule.bad), example, every_rule(), unsafe=True)
    assert fixed.applied and not [f for f in fixed.remaining if f.code == rule.code], fixed.text


def test_every_rule_documents_what_the_tables_show() -> None:
    for rule in RULES:
        for attribute in ("code", "name", "summary", "why", "bad", "good", "fix_doc", "brief", "fix_brief"):
            assert getattr(rule, attribute, "").strip(), f"{rule.__name__}.{attribute} is missing or empty"
