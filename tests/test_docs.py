"""The hand-written documents that name code stay true to it: docs/architecture.md maps every
form to its rule and fix builder, and CHANGELOG.md announces every rule."""

from __future__ import annotations

import re
from pathlib import Path

from torchlint_inplace import registry
from torchlint_inplace.analysis.model import Form
from torchlint_inplace.fixes import builders
from torchlint_inplace.rule import FormRule

REPO = Path(__file__).resolve().parent.parent
ARCHITECTURE = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
CHANGELOG = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")


def _form_rows() -> dict[str, list[str]]:
    """The "Forms, rules and fixes" table: form name -> its cells."""
    table = ARCHITECTURE.split("## Forms, rules and fixes", 1)[1].split("\n## ", 1)[0]
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines() if line.startswith("| `")
    ]
    return {re.match(r"`(\w+)`", cells[0])[1]: cells for cells in rows}


def test_every_form_has_a_row_naming_its_rule_and_builder() -> None:
    rows = _form_rows()
    assert set(rows) == {form.name for form in Form}
    for rule in registry.all_rules():
        if not issubclass(rule, FormRule):
            continue
        cells = rows[rule.form.name]
        module = rule.__module__.rsplit(".", 1)[-1]
        assert f"{rule.code} `rules/{module}.py`" in cells[2], cells
        builder = cells[3].strip("`").removeprefix("builders.")
        if rule.fix is FormRule.fix:
            assert builder == "none", cells
        else:
            assert hasattr(builders, builder), cells


def test_the_files_the_map_names_exist() -> None:
    named = set(re.findall(r"`((?:analysis|fixes|reporters|rules)/[\w/]+\.py|[\w]+\.py)`", ARCHITECTURE))
    assert named, "the map names no file: this test would check nothing"
    missing = [
        name for name in named if not (REPO / "torchlint_inplace" / name).exists() and not (REPO / name).exists()
    ]
    assert not missing


def test_the_changelog_announces_every_rule() -> None:
    assert [code for code in registry.codes() if code not in CHANGELOG] == []
