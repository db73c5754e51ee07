"""A rule's documentation as markdown, for `torchlint-inplace rule TIP001` (like `ruff rule`).

Rendered from the Rule class itself, so the catalogue has one source of truth for its docs.
"""

from __future__ import annotations

import inspect
import textwrap

from .diagnostics import NOT_CHECKED_CODE, NOT_CHECKED_NAME
from .rule import Rule

# TIP000 is not a rule class (it cannot be selected or ignored) but users see it in output.
NOT_CHECKED_DOC = f"""\
# {NOT_CHECKED_NAME} ({NOT_CHECKED_CODE})

The file could not be checked, so other findings in it may be missing: it does not parse,
cannot be read or decoded (declare its encoding with a PEP 263 `# -*- coding: ... -*-` line),
is larger than 10 MB, or the linter hit an internal error on it (please report that one,
with the file). This finding cannot be suppressed, selected away or ignored.
"""


def _prose(text: str) -> str:
    return inspect.cleandoc(text)


def _code(text: str) -> str:
    """Dedented as a whole: cleandoc would treat the first line apart and break nesting."""
    return textwrap.dedent(text).strip("\n")


def render(rule: type[Rule]) -> str:
    default = "" if rule.default_enabled else "\nNot enabled by default: select it by code, or run with `--preview`.\n"
    return (
        f"# {rule.name} ({rule.code})\n\n"
        f"{_prose(rule.summary)}\n{default}\n"
        f"## Why this breaks autograd\n\n{_prose(rule.why)}\n\n"
        f"## Example\n\n```python\n{_code(rule.bad)}\n```\n\n"
        f"## Use instead\n\n```python\n{_code(rule.good)}\n```\n\n"
        f"## Fix\n\n{_prose(rule.fix_doc)}\n"
    )
