"""A rule's documentation as markdown, for `torchlint-inplace rule TIP001` (like `ruff rule`).

Rendered from the Rule class itself, so the catalogue has one source of truth for its docs,
with ruff's sections: what it flags, why it breaks autograd, an example, what to write
instead, the fix, and known problems (generated from the fixtures, see `KNOWN_PROBLEMS`).
"""

from __future__ import annotations

import inspect
import json
import textwrap
from functools import cache
from importlib import resources
from typing import TypedDict

from . import registry
from .diagnostics import NOT_CHECKED_CODE, NOT_CHECKED_NAME
from .rule import Rule

# TIP000 is not a rule class (it cannot be selected or ignored) but users see it in output.
NOT_CHECKED_BRIEF = "the file could not be checked (syntax error, not UTF-8, unreadable, over 10 MB)"
NOT_CHECKED_DOC = f"""\
# {NOT_CHECKED_NAME} ({NOT_CHECKED_CODE})

The file could not be checked, so other findings in it may be missing: it does not parse,
cannot be read or decoded (declare its encoding with a PEP 263 `# -*- coding: ... -*-` line),
is larger than 10 MB, or the linter hit an internal error on it (please report that one,
with the file). This finding cannot be suppressed, selected away or ignored.
"""

# Where the rules are documented for a link (an editor's diagnostic, a report): the package's
# page, whose README rule table gives each code's row an anchor of its own (`anchor`).
DOCS_URL = "https://pypi.org/project/torchlint-inplace/"


def anchor(code: str) -> str:
    """The id of a code's row in README.md's rule table (scripts/gen_docs.py writes them)."""
    return code.lower()


def url(code: str) -> str:
    """The documentation of one rule code: its row of the rule table on the package's page."""
    return f"{DOCS_URL}#{anchor(code)}"


# Hazards the analysis misses and safe code it flags, per code, as the fixtures record them
# (`# known-miss:` and `# known-false-positive:` comments); written by scripts/gen_docs.py.
KNOWN_PROBLEMS = "known_problems.json"
_KINDS = {"miss": "Not reported by default", "false-positive": "Reported although safe"}


class KnownProblem(TypedDict):
    kind: str  # "miss" or "false-positive"
    problem: str  # why, as the fixture's comment says it
    fixtures: list[str]  # the fixture files that show it


@cache
def known_problems() -> dict[str, list[KnownProblem]]:
    text = resources.files("torchlint_inplace.data").joinpath(KNOWN_PROBLEMS).read_text(encoding="utf-8")
    problems: dict[str, list[KnownProblem]] = json.loads(text)
    return problems


def _prose(text: str) -> str:
    return inspect.cleandoc(text)


def _code(text: str) -> str:
    """Dedented as a whole: cleandoc would treat the first line apart and break nesting."""
    return textwrap.dedent(text).strip("\n")


def _known_problems(code: str) -> str:
    items = [
        f"- {_KINDS[item['kind']]}: {item['problem']} ({', '.join(item['fixtures'])})"
        for item in known_problems().get(code, [])
    ]
    return "\n## Known problems\n\n" + "\n".join(items) + "\n" if items else ""


def render(rule: type[Rule]) -> str:
    default = "" if rule.default_enabled else "\nNot enabled by default: select it by code, or run with `--preview`.\n"
    return (
        f"# {rule.name} ({rule.code})\n\n"
        f"{_prose(rule.summary)}\n{default}\n"
        f"## Why this breaks autograd\n\n{_prose(rule.why)}\n\n"
        f"## Example\n\n```python\n{_code(rule.bad)}\n```\n\n"
        f"## Use instead\n\n```python\n{_code(rule.good)}\n```\n\n"
        f"## Fix\n\n{_prose(rule.fix_doc)}\n"
        f"{_known_problems(rule.code)}"
    )


def render_all() -> str:
    """The whole catalogue, TIP000 first, as `rule --all` prints it."""
    return "\n".join([NOT_CHECKED_DOC, *(render(rule) for rule in registry.all_rules())])
