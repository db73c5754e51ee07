"""`api.lint_buffer`, what the language server lints an open document with: the findings come
without their fixes, and the fixes are built only when asked for, from the same analysis."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from support import every_rule

from torchlint_inplace import analysis, api
from torchlint_inplace.fixes import builders

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# One fixture of each rule's with a fix, and a notebook (its findings are relabelled per cell).
SAMPLES = [
    FIXTURES / name
    for name in (
        "tip001/leaf_parameters.py",
        "tip002/saved_tensors.py",
        "tip003/saved_tensors.py",
        "tip004/inplace_modules.py",
        "tip005/custom_functions.py",
        "tip006/out_argument.py",
        "tip007/helpers.py",
        "notebooks/autograd_tutorial.ipynb",
    )
]
TWO_RULES = """\
import torch
from torch import nn


class A(nn.Module):
    def forward(self, x: torch.Tensor):
        y = x.sigmoid()
        y[0] = 0.0
        z = x.exp()
        z += 1
        return y, z
"""


@pytest.mark.parametrize("path", SAMPLES, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_the_findings_are_those_of_lint_source_with_their_fixes_built_later(path: Path) -> None:
    text, settings = path.read_text(encoding="utf-8"), every_rule(str(FIXTURES))
    eager = api.lint_source(text, path, settings)
    linted = api.lint_buffer(text, path, settings)
    assert linted.findings == [replace(finding, fix=None) for finding in eager]
    assert linted.with_fixes() == eager and any(finding.fix is not None for finding in eager)
    assert linted.with_fixes() is linted.with_fixes()  # built once


def test_per_file_ignores_apply_to_the_findings_with_fixes_too() -> None:
    settings = every_rule("/work")
    ignoring = replace(settings, per_file_ignores=(("*.py", ("TIP002",)),))
    assert {finding.code for finding in api.lint_source(TWO_RULES, "/work/m.py", settings)} == {"TIP002", "TIP003"}
    linted = api.lint_buffer(TWO_RULES, "/work/m.py", ignoring)
    assert [finding.code for finding in linted.findings] == ["TIP003"]
    assert [(finding.code, finding.fix is not None) for finding in linted.with_fixes()] == [("TIP003", True)]


def test_no_fix_is_built_until_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(module: object) -> None:
        raise AssertionError("a fix was built")

    monkeypatch.setattr(builders, "index_of", refuse)
    path = SAMPLES[0]
    linted = api.lint_buffer(path.read_text(encoding="utf-8"), path, every_rule(str(FIXTURES)))
    assert linted.findings
    with pytest.raises(AssertionError, match="a fix was built"):
        linted.with_fixes()


def test_versions_linted_one_after_another_find_what_a_fresh_lint_finds() -> None:
    """An editor's session: each version parsed from the last one's tree (`reparse`) and
    analysed with the callee summaries kept, against each version linted afresh."""
    path = FIXTURES / "tip002" / "saved_tensors.py"
    settings, project = every_rule(str(FIXTURES)), analysis.Project()
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    hazard = next(number for number, line in enumerate(lines) if "] = " in line and line.startswith("        "))
    versions = [
        "".join(lines),
        "".join([*lines, "# typed at the end\n"]),
        "".join([*lines[:hazard], lines[hazard].replace("] = ", "] += "), *lines[hazard + 1 :]]),
        "".join([*lines[:hazard], "        pass  # the write removed\n", *lines[hazard + 1 :]]),
        "".join(lines),
    ]
    for text in versions:
        linted = api.lint_buffer(text, path, settings, project=project)
        assert linted.with_fixes() == api.lint_source(text, path, settings)
    first, second = (project.parse(str(path), text) for text in versions[:2])
    assert set(map(id, first.body)) & set(map(id, second.body)), "no statement was kept: nothing was reparsed"
