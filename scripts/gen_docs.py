"""Regenerates what the documentation derives from the code, or checks that it is current.

    python scripts/gen_docs.py           # rewrite the generated parts
    python scripts/gen_docs.py --check   # exit 1, naming them, if any is stale

Generated, never edited by hand:

- README.md's rule table and fix table (between `<!-- generated: ... -->` markers), from the
  rule registry: each rule's `name`, `brief`, `fix_brief` and `default_enabled`, TIP000's row,
  and the fix for writes into a leaf (`fixes.builders.LEAF_FIX_BRIEF`); each code's cell holds
  the anchor the language server's diagnostics link to (`ruledoc.url`);
- torchlint_inplace/data/known_problems.json, each rule's known problems (`rule CODE` prints
  them), from the fixtures' `# known-miss:` and `# known-false-positive:` comments.

tests/test_generated_docs.py fails while either is stale.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # the fixtures' comment grammar lives with their test

from test_fixtures import FIXTURE_FILES, FIXTURES, known_problems  # noqa: E402

from torchlint_inplace import registry, ruledoc  # noqa: E402
from torchlint_inplace.diagnostics import NOT_CHECKED_CODE, NOT_CHECKED_NAME  # noqa: E402
from torchlint_inplace.fixes.builders import LEAF_FIX_BRIEF  # noqa: E402

README = REPO / "README.md"
KNOWN_PROBLEMS = REPO / "torchlint_inplace" / "data" / ruledoc.KNOWN_PROBLEMS
COMMAND = "python scripts/gen_docs.py"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _code(code: str) -> str:
    """A code's cell, with the anchor editors link to (`ruledoc.url`)."""
    return f'<a id="{ruledoc.anchor(code)}"></a>{code}'


def rule_table() -> str:
    rows = ["| code | name | form | enabled |", "| --- | --- | --- | --- |"]
    rows.append(f"| {_code(NOT_CHECKED_CODE)} | {NOT_CHECKED_NAME} | {_cell(ruledoc.NOT_CHECKED_BRIEF)} | always |")
    for rule in registry.all_rules():
        enabled = "by default" if rule.default_enabled else "with `--preview`"
        rows.append(f"| {_code(rule.code)} | {rule.name} | {_cell(rule.brief)} | {enabled} |")
    return "\n".join(rows)


def fix_table() -> str:
    rows = ["| rule | fix |", "| --- | --- |"]
    rows += [f"| {rule.code} | {_cell(rule.fix_brief)} |" for rule in registry.all_rules()]
    rows.append(f"| leaf that requires grad | {_cell(LEAF_FIX_BRIEF)} |")
    return "\n".join(rows)


TABLES = {"rule table": rule_table, "fix table": fix_table}


def _block(name: str) -> re.Pattern[str]:
    return re.compile(
        rf"(<!-- generated: {name}, by `{re.escape(COMMAND)}` from the rule registry -->\n)(?:.*?\n)?(<!-- end of {name} -->)",
        re.DOTALL,
    )


def readme(text: str) -> str:
    """`text` (the README) with each generated table replaced by its current rendering."""
    for name, render in TABLES.items():
        match = _block(name).search(text)
        if match is None:
            raise SystemExit(f"README.md has no {name} markers: {_block(name).pattern}")
        text = text[: match.end(1)] + render() + "\n" + text[match.start(2) :]
    return text


def _problems() -> Iterator[tuple[str, str, str, str]]:
    for path in FIXTURE_FILES:
        for code, kind, why in known_problems(path.read_text(encoding="utf-8")):
            yield code, kind, why, f"fixtures/{path.relative_to(FIXTURES).as_posix()}"


def known_problems_document() -> str:
    """Per code, each distinct problem once, with the fixtures that show it."""
    grouped: dict[str, dict[tuple[str, str], list[str]]] = {}
    for code, kind, why, where in _problems():
        fixtures = grouped.setdefault(code, {}).setdefault((kind, why), [])
        if where not in fixtures:
            fixtures.append(where)
    document = {
        code: [
            {"kind": kind, "problem": why, "fixtures": fixtures} for (kind, why), fixtures in sorted(problems.items())
        ]
        for code, problems in sorted(grouped.items())
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def generated() -> dict[Path, str]:
    return {README: readme(README.read_text(encoding="utf-8")), KNOWN_PROBLEMS: known_problems_document()}


def stale() -> list[Path]:
    return [path for path, text in generated().items() if path.read_text(encoding="utf-8") != text]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a generated file is stale, writing nothing")
    options = parser.parse_args(argv)
    if options.check:
        old = stale()
        for path in old:
            print(f"{path.relative_to(REPO)} is stale: run `{COMMAND}`", file=sys.stderr)
        return 1 if old else 0
    for path, text in generated().items():
        path.write_text(text, encoding="utf-8", newline="\n")
        print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
