"""Findings that only some configuration reaches: stated, and reported as warnings.

A finding whose path assumed something (`attn_drop > 0`, training mode) says it in the message
("; only when ...") and in JSON/SARIF (`conditions`). When the configuration's own defaults make
that assumption false, nobody gets the hazard without changing a default: such a finding stays
default-on, so that a user who turns the option on is warned, but carries severity `warning`
(GitHub `::warning`, SARIF `level: warning`, "Found 1 warning."). Every other finding is an error.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import jsonschema

from torchlint_inplace import api
from torchlint_inplace.diagnostics import Severity
from torchlint_inplace.reporters import Report
from torchlint_inplace.reporters.json_report import document as json_document
from torchlint_inplace.reporters.sarif import document as sarif_document
from torchlint_inplace.reporters.text import found

SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "docs" / "json-schema.json").read_text(encoding="utf-8"))

ATTENTION = """\
import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, attn_drop: float = {default}) -> None:
        super().__init__()
        self.attn_drop = nn.Dropout(attn_drop, inplace=True)

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        attn = (q @ k.transpose(-2, -1)).softmax(-1)
        attn = self.attn_drop(attn)
        return attn @ k
"""


def _only(text: str, tmp_path: Path):
    path = tmp_path / "attention.py"
    path.write_text(text, encoding="utf-8")
    findings = api.lint_source(text, path)
    assert len(findings) == 1, findings
    return findings[0], path


def test_a_default_that_excludes_the_hazard_makes_a_stated_warning(tmp_path: Path) -> None:
    finding, _ = _only(ATTENTION.format(default="0.0"), tmp_path)
    assert finding.code == "TIP004"
    assert finding.severity is Severity.WARNING
    assert finding.conditions == ["`attn_drop != 0.0` (default 0.0)", "in training"]
    assert finding.message.endswith("; only when `attn_drop != 0.0` (default 0.0), in training")


def test_a_default_that_reaches_the_hazard_is_an_error_that_still_names_the_mode(tmp_path: Path) -> None:
    finding, _ = _only(ATTENTION.format(default="0.1"), tmp_path)
    assert finding.severity is Severity.ERROR
    assert finding.conditions == ["in training"]


def test_conditions_travel_in_json_and_sarif(tmp_path: Path) -> None:
    finding, path = _only(ATTENTION.format(default="0.0"), tmp_path)
    report = Report(findings=[finding], root=tmp_path, files_checked=1, fixed=0)
    as_json = json_document(report)
    jsonschema.validate(as_json, SCHEMA)
    assert as_json["findings"][0]["severity"] == "warning"
    assert as_json["findings"][0]["conditions"] == finding.conditions
    result = sarif_document(report)["runs"][0]["results"][0]
    assert result["level"] == "warning"
    assert result["properties"]["conditions"] == finding.conditions


def test_an_unconditional_finding_has_no_conditions_key(tmp_path: Path) -> None:
    text = "import torch\n\n\nclass Gate(torch.nn.Module):\n    def forward(self, x):\n        y = torch.sigmoid(x)\n        y.mul_(2)\n        return y\n"
    finding, path = _only(text, tmp_path)
    assert finding.severity is Severity.ERROR and finding.conditions == []
    as_json = json_document(Report(findings=[finding], root=tmp_path, files_checked=1, fixed=0))
    assert "conditions" not in as_json["findings"][0]


def test_the_summary_counts_warnings_apart(tmp_path: Path) -> None:
    warning, _ = _only(ATTENTION.format(default="0.0"), tmp_path)
    error, _ = _only(ATTENTION.format(default="0.1"), tmp_path)
    assert found([warning]) == "Found 1 warning"
    assert found([error, warning]) == "Found 1 error and 1 warning"
    assert found([error, error]) == "Found 2 errors"


def test_a_forward_picked_by_configuration_holds_under_the_pick() -> None:
    """`self.forward = self.forward_slicing` under `if forward == "slicing"` (timm's FasterNet):
    the slicing forward's hazard is stated with the pick, a warning since the default picks the
    other forward."""
    path = Path(__file__).resolve().parent.parent / "fixtures" / "precision" / "forward_picked_in_init.py"
    (finding,) = api.lint_source(path.read_text(encoding="utf-8"), path)
    assert finding.code == "TIP002"
    assert finding.severity is Severity.WARNING
    assert finding.conditions == ["`forward == 'slicing'` (default 'split_cat')"]


OPTION_GUARDED = Path(__file__).resolve().parent.parent / "fixtures" / "precision" / "option_guarded_paths.py"


def _without_option_drivers(text: str) -> str:
    """A fixture as a library file is: its classes and default drivers, without the `raises_`
    drivers whose calls turn the options on."""
    lines = text.splitlines(keepends=True)
    for node in reversed(ast.parse(text).body):
        if isinstance(node, ast.FunctionDef) and node.name.startswith("raises_"):
            assert node.end_lineno is not None
            del lines[node.lineno - 1 : node.end_lineno]
    return "".join(lines)


def _graded(text: str, path: Path = OPTION_GUARDED) -> list[tuple[str, int, Severity, list[str]]]:
    findings = api.lint_source(text, path)
    return [(finding.code, finding.line, finding.severity, finding.conditions) for finding in findings]


def test_paths_only_a_non_default_option_reaches_are_stated_warnings() -> None:
    """A `forward` nobody calls runs with its options open; a method its siblings call only
    under an option (esm's `_inference_forward`) holds only if it runs, and says so."""
    assert _graded(_without_option_drivers(OPTION_GUARDED.read_text(encoding="utf-8"))) == [
        ("TIP001", 23, Severity.WARNING, ["`inplace` is true (default False)"]),
        (
            "TIP003",
            35,
            Severity.WARNING,
            ["`_inference_forward` runs (its callers here do not call it with their defaults)"],
        ),
    ]


def test_a_call_that_turns_the_option_on_makes_the_finding_an_error() -> None:
    """The fixture's `raises_` drivers pass the options (and prove the labels by running): the
    paths are reached, so nothing is assumed."""
    assert _graded(OPTION_GUARDED.read_text(encoding="utf-8")) == [
        ("TIP001", 23, Severity.ERROR, []),
        ("TIP003", 35, Severity.ERROR, []),
    ]


def test_an_optional_tensor_argument_states_that_it_is_set() -> None:
    """`target_embedding: torch.Tensor | None = None` (SAM's two-way transformer): annotated as
    a tensor, still None unless a caller passes one."""
    path = OPTION_GUARDED.with_name("optional_tensor_argument.py")
    assert _graded(_without_option_drivers(path.read_text(encoding="utf-8")), path) == [
        ("TIP003", 36, Severity.ERROR, ["`target_embedding` is set"])
    ]


def test_an_index_of_an_optional_argument_states_that_it_is_set() -> None:
    """`state[2][...] = ...` with `state=None` (RWKV's recurrent state), after `state` was
    rebound to what a helper returned: a tensor only when a caller passes one."""
    path = OPTION_GUARDED.with_name("optional_state_written_by_index.py")
    assert _graded(_without_option_drivers(path.read_text(encoding="utf-8")), path) == [
        ("TIP002", 41, Severity.ERROR, ["`state` is set"])
    ]


def test_a_method_named_only_in_a_string_holds_unconditionally() -> None:
    """`forward` raising "call encode(x)" does not call `encode`: its finding is its own."""
    path = OPTION_GUARDED.with_name("method_named_in_a_string.py")
    assert _graded(_without_option_drivers(path.read_text(encoding="utf-8")), path) == [
        ("TIP001", 20, Severity.ERROR, [])
    ]
