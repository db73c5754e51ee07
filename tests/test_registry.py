"""The rule catalogue: what the registry finds, and that one code names one rule."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from torchlint_inplace import registry

RULE = """\
from torchlint_inplace.rule import Rule


class {name}(Rule):
    code, name = "{code}", "{slug}"
"""


def _package(root: Path, name: str, rules: dict[str, tuple[str, str]]):
    """A package of rule modules: module name -> (class name, code)."""
    folder = root / name
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    for module, (cls, code) in rules.items():
        (folder / f"{module}.py").write_text(RULE.format(name=cls, code=code, slug=cls.lower()))
    sys.path.insert(0, str(root))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(root))


def test_rules_are_collected_sorted_by_code(tmp_path: Path) -> None:
    package = _package(tmp_path, "catalogue_ok", {"b": ("Second", "TIP002"), "a": ("First", "TIP001")})
    assert [rule.code for rule in registry.collect(package)] == ["TIP001", "TIP002"]


def test_a_duplicate_rule_code_is_an_error(tmp_path: Path) -> None:
    package = _package(tmp_path, "catalogue_twice", {"a": ("First", "TIP001"), "b": ("Again", "TIP001")})
    with pytest.raises(
        registry.DuplicateRuleCode,
        match=re.escape("rule code TIP001 is used by both catalogue_twice.a.First and catalogue_twice.b.Again"),
    ):
        registry.collect(package)


def test_the_shipped_catalogue_has_unique_codes_and_names() -> None:
    rules = registry.all_rules()
    assert len({rule.code for rule in rules}) == len({rule.name for rule in rules}) == len(rules)


def test_find_accepts_codes_in_any_case_and_names() -> None:
    first = registry.all_rules()[0]
    assert registry.find(first.code.lower()) is registry.find(first.name) is first
    assert registry.find("no-such-rule") is None
