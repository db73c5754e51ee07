"""What the documentation derives from the code is current: README.md's rule and fix tables
(from the rule registry) and each rule's known problems (from the fixtures' comments).

When this fails, run `python scripts/gen_docs.py` and commit what it rewrote.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from torchlint_inplace import registry, ruledoc

REPO = Path(__file__).resolve().parent.parent


def _generator():
    spec = importlib.util.spec_from_file_location("gen_docs", REPO / "scripts" / "gen_docs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


gen_docs = _generator()


def test_generated_files_are_current() -> None:
    stale = [path.relative_to(REPO).as_posix() for path in gen_docs.stale()]
    assert not stale, f"stale: {stale}; run `{gen_docs.COMMAND}` and commit the result"


def test_the_rule_table_has_a_row_per_rule_and_tip000() -> None:
    rows = [line for line in gen_docs.rule_table().splitlines()[2:]]
    assert [row.split(" | ")[0].lstrip("| ").split("</a>")[-1] for row in rows] == ["TIP000", *registry.codes()]


def test_each_code_s_documentation_link_leads_to_its_own_row() -> None:
    """What an editor's diagnostic links to (`codeDescription.href`) is an anchor README.md
    has, on that code's row of the rule table."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for code in ["TIP000", *registry.codes()]:
        link = ruledoc.url(code)
        assert link.startswith(ruledoc.DOCS_URL + "#")
        (row,) = [line for line in readme.splitlines() if f'id="{link.split("#")[1]}"' in line]
        assert row.startswith("| ") and f"</a>{code} |" in row


def test_known_problems_reach_the_rule_documentation() -> None:
    problems = json.loads(gen_docs.known_problems_document())
    assert problems, "the fixtures record no known problem: this test would check nothing"
    for code, items in problems.items():
        rule = registry.find(code)
        assert rule is not None, f"known problems for {code}, which no rule has"
        doc = ruledoc.render(rule)
        assert "## Known problems" in doc and all(item["problem"] in doc for item in items)
