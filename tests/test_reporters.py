"""The five output formats, checked on hand-built findings (the analysis is not involved)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import jsonschema
import pytest

from torchlint_inplace import registry
from torchlint_inplace.diagnostics import (
    Applicability,
    Edit,
    Finding,
    Fix,
    Position,
    Related,
    Severity,
    Span,
    not_checked,
)
from torchlint_inplace.reporters import REPORTERS, Report, write_report
from torchlint_inplace.reporters.frame import display_width
from torchlint_inplace.reporters.github import escape_data, escape_property
from torchlint_inplace.rule import Rule

REPO = Path(__file__).resolve().parents[1]
JSON_SCHEMA = json.loads((REPO / "docs/json-schema.json").read_text(encoding="utf-8"))
SARIF_SCHEMA_PATH = Path(__file__).resolve().parents[2] / "shared/data/sarif-schema-2.1.0.json"

MODEL = """\
import torch


class A(torch.nn.Module):
    def forward(self, t):
        y = self.x * t
        z = y.sum()
        t[:] = 3.0
        return z
"""

HEAD = """\
def head(h):
    out = h.sigmoid()
    h.mul_(
        2,
    )
    return out
"""


def span(line: int, column: int, end_line: int, end_column: int) -> Span:
    return Span(Position(line, column), Position(end_line, end_column))


def build_report(root: Path, fixed: int = 0, files_checked: int = 4) -> Report:
    model, head, broken = (str(root / name) for name in ("src/model.py", "src/modèle.py", "broken.py"))
    findings = [
        not_checked(broken, "syntax error: unexpected indent", 2, 4),
        Finding(
            path=model,
            code="TIP002",
            name="index-assign-saved",
            message="`t` is modified in place here but `*` at line 6 saved it for backward; backward() will raise",
            severity=Severity.ERROR,
            span=span(8, 8, 8, 18),
            consequence="raises at backward",
            related=(Related(model, span(6, 12, 6, 22), "`*` saved it for backward here"),),
            help="assign into a copy: `t = t.clone()` first",
            fix=Fix(
                "Clone `t` before the assignment",
                (Edit(span(8, 8, 8, 8), "t = t.clone()\n        "),),
                Applicability.UNSAFE,
            ),
        ),
        Finding(
            path=head,
            code="TIP001",
            name="inplace-method-saved",
            message="`h` is modified in place here but `sigmoid` at line 2 saved its result, which aliases `h`",
            severity=Severity.WARNING,
            span=span(3, 4, 5, 5),
            consequence="silently changes `out` read at line 6",
            related=(
                Related(head, span(2, 10, 2, 21), "`sigmoid` saved it for backward here"),
                Related(str(root / "src/other.py"), span(40, 0, 40, 3), "`h` is also read here"),
            ),
            fix=Fix("Use `h = h.mul(2)`", (Edit(span(3, 4, 5, 5), "h = h.mul(2)"),), Applicability.SAFE),
        ),
    ]
    findings.sort(key=Finding.sort_key)
    return Report(findings, files_checked, root, {model: MODEL, head: HEAD}, fixed)


def render(format: str, report: Report, color: bool = False) -> str:
    stream = io.StringIO()
    write_report(format, report, stream, color)
    return stream.getvalue()


@pytest.fixture
def report(tmp_path: Path) -> Report:
    return build_report(tmp_path)


def test_concise_is_one_line_per_finding_with_relative_paths_and_summary(report):
    assert render("concise", report) == (
        "broken.py:2:5: TIP000 syntax error: unexpected indent\n"
        "src/model.py:8:9: TIP002 `t` is modified in place here but `*` at line 6 saved it for backward; backward() will raise\n"
        "src/modèle.py:3:5: TIP001 [*] `h` is modified in place here but `sigmoid` at line 2 saved its result, which aliases `h`\n"
        "Found 2 errors and 1 warning in 3 files (4 files checked). [*] 1 fixable with --fix (1 more with --unsafe-fixes).\n"
    )


FULL = """\
broken.py:2:5: TIP000 syntax error: unexpected indent
 = consequence: file not checked

src/model.py:8:9: TIP002 `t` is modified in place here but `*` at line 6 saved it for backward; backward() will raise
  |
6 |         y = self.x * t
7 |         z = y.sum()
8 |         t[:] = 3.0
  |         ^^^^^^^^^^ TIP002
9 |         return z
  |
  = note: src/model.py:6:13: `*` saved it for backward here
  |
6 |         y = self.x * t
  |             ^^^^^^^^^^
  |
  = consequence: raises at backward
  = help: assign into a copy: `t = t.clone()` first
  = fix: Clone `t` before the assignment (unsafe, use --unsafe-fixes)

src/modèle.py:3:5: TIP001 [*] `h` is modified in place here but `sigmoid` at line 2 saved its result, which aliases `h`
  |
1 | def head(h):
2 |     out = h.sigmoid()
3 |     h.mul_(
  |     ^^^^^^^ TIP001
4 |         2,
5 |     )
  |
  = note: src/modèle.py:2:11: `sigmoid` saved it for backward here
  |
2 |     out = h.sigmoid()
  |           ^^^^^^^^^^^
  |
  = note: src/other.py:40:1: `h` is also read here
  = consequence: silently changes `out` read at line 6
  = fix: [*] Use `h = h.mul(2)` (safe)

Found 2 errors and 1 warning in 3 files (4 files checked). [*] 1 fixable with --fix (1 more with --unsafe-fixes).
"""


def test_full_shows_frames_notes_consequence_help_and_fix(report):
    assert render("full", report) == FULL


def test_github_annotations_with_severity_and_escaping(report):
    assert render("github", report) == (
        "::error file=broken.py,line=2,col=5,endLine=2,endColumn=5,title=TIP000 file-not-checked::"
        "syntax error: unexpected indent\n"
        "::error file=src/model.py,line=8,col=9,endLine=8,endColumn=19,title=TIP002 index-assign-saved::"
        "`t` is modified in place here but `*` at line 6 saved it for backward; backward() will raise"
        "%0Aassign into a copy: `t = t.clone()` first\n"
        "::warning file=src/modèle.py,line=3,col=5,endLine=5,endColumn=6,title=TIP001 inplace-method-saved::"
        "`h` is modified in place here but `sigmoid` at line 2 saved its result, which aliases `h`\n"
    )


def test_github_escaping_follows_actions_toolkit():
    assert escape_data("50% a\r\nb: c, d") == "50%25 a%0D%0Ab: c, d"
    assert escape_property("a,b:c%d\n") == "a%2Cb%3Ac%25d%0A"


@pytest.mark.parametrize("format", ["full", "concise"])
def test_colour_only_when_asked(report, format):
    plain, coloured = render(format, report, color=False), render(format, report, color=True)
    assert "\x1b[" not in plain
    assert "\x1b[1;31mTIP002\x1b[0m" in coloured
    assert "\x1b[1;33mTIP001\x1b[0m" in coloured  # warnings in yellow


@pytest.mark.parametrize("format", ["json", "sarif", "github"])
def test_machine_formats_never_colour_nor_summarise(report, format):
    output = render(format, report, color=True)
    assert "\x1b[" not in output
    assert "Found" not in output and "checks passed" not in output


@pytest.mark.parametrize(
    ("count", "files_checked", "fixed", "expected"),
    [
        (0, 5, 0, "All checks passed!"),
        (1, 1, 0, "Found 1 error."),
        (3, 1, 0, "Found 3 errors."),
        (1, 2, 0, "Found 1 error in 1 file (2 files checked)."),
        (1, 1, 2, "Found 3 errors (2 fixed, 1 remaining)."),
        (0, 1, 2, "Found 2 errors (2 fixed, 0 remaining)."),
        (1, 7, 1, "Found 2 errors (1 fixed, 1 remaining; 7 files checked)."),
    ],
)
@pytest.mark.parametrize("format", ["full", "concise"])
def test_summary_wording(tmp_path, format, count, files_checked, fixed, expected):
    findings = [not_checked(str(tmp_path / "a.py"), "not UTF-8", line) for line in range(1, count + 1)]
    output = render(format, Report(findings, files_checked, tmp_path, {}, fixed))
    assert output.splitlines()[-1] == expected


def test_frame_aligns_carets_under_tabs_and_wide_characters(tmp_path):
    path = str(tmp_path / "m.py")
    source = "\tx = '数据'; y.add_(1)\n"
    finding = not_checked(path, "m", 1, source.index("y"))
    output = render("full", Report([finding], 1, tmp_path, {path: source}))
    code_line, caret_line = output.splitlines()[2:4]
    assert code_line == "1 |     x = '数据'; y.add_(1)"
    # the tab is 4 columns and each CJK character 2, so `y` sits at terminal column 4 + 16
    assert caret_line == "  | " + " " * 16 + "^ TIP000"
    assert display_width("\t数x") == 4 + 2 + 1


def test_frame_counts_lines_as_python_does_and_skips_missing_lines(tmp_path):
    path = str(tmp_path / "m.py")
    source = "a = 1\x0c  # form feed is not a line break\nb.add_(1)\n"
    shown = render("concise", Report([not_checked(path, "m", 2)], 1, tmp_path, {path: source}))
    assert shown.startswith("m.py:2:1:")
    assert "2 | b.add_(1)" in render("full", Report([not_checked(path, "m", 2)], 1, tmp_path, {path: source}))
    beyond = render("full", Report([not_checked(path, "m", 9)], 1, tmp_path, {path: source}))
    assert "|" not in beyond


def test_paths_outside_root_are_shown_as_given(tmp_path):
    outside = str(tmp_path.parent / "elsewhere.py")
    output = render("concise", Report([not_checked(outside, "unreadable")], 1, tmp_path / "project", {}))
    assert output.startswith(f"{Path(outside).as_posix()}:1:1: TIP000")


def test_unknown_format_is_a_clear_error(report):
    assert set(REPORTERS) == {"full", "concise", "json", "sarif", "github"}
    with pytest.raises(ValueError, match="unknown output format 'xml'; choose one of full, concise"):
        render("xml", report)


def test_json_matches_documented_schema(report, tmp_path):
    validator = jsonschema.Draft202012Validator(JSON_SCHEMA)
    validator.check_schema(JSON_SCHEMA)
    document = json.loads(render("json", report))
    validator.validate(document)
    validator.validate(json.loads(render("json", Report([], 0, tmp_path, {}))))
    assert [finding["filename"] for finding in document["findings"]] == ["broken.py", "src/model.py", "src/modèle.py"]
    saved = document["findings"][1]
    assert saved["location"] == {"row": 8, "column": 9} and saved["end_location"] == {"row": 8, "column": 19}
    assert saved["related"] == [
        {
            "filename": "src/model.py",
            "location": {"row": 6, "column": 13},
            "end_location": {"row": 6, "column": 23},
            "message": "`*` saved it for backward here",
        }
    ]
    assert saved["fix"] == {
        "applicability": "unsafe",
        "message": "Clone `t` before the assignment",
        "edits": [
            {
                "content": "t = t.clone()\n        ",
                "location": {"row": 8, "column": 9},
                "end_location": {"row": 8, "column": 9},
            }
        ],
    }
    assert document["findings"][0]["fix"] is None and document["files_checked"] == 4


def test_json_schema_rejects_drift(report):
    document = json.loads(render("json", report))
    document["findings"][0]["url"] = "https://example.invalid"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, JSON_SCHEMA, cls=jsonschema.Draft202012Validator)


class FakeRule(Rule):
    code = "TIP001"
    name = "inplace-method-saved"
    summary = "Trailing-underscore method on a tensor saved for backward."
    why = "Autograd checks the version counter of saved tensors at backward."
    bad = "y = x.sigmoid()\nx.mul_(2)\n"
    good = "y = x.sigmoid()\nx = x.mul(2)\n"
    fix_doc = "Rewrites to the out-of-place method."
    severity = Severity.WARNING


@pytest.fixture
def sarif(report, monkeypatch) -> dict:
    monkeypatch.setattr(registry, "all_rules", lambda: (FakeRule,))
    return json.loads(render("sarif", report))


def test_sarif_validates_against_official_schema(sarif, tmp_path):
    if not SARIF_SCHEMA_PATH.exists():
        pytest.skip(f"official SARIF schema not found at {SARIF_SCHEMA_PATH}")
    schema = json.loads(SARIF_SCHEMA_PATH.read_text(encoding="utf-8"))
    validator = jsonschema.validators.validator_for(schema)(schema)
    validator.validate(sarif)
    validator.validate(json.loads(render("sarif", Report([], 0, tmp_path, {}))))


def test_sarif_driver_lists_catalogue_and_tip000_with_help(sarif):
    driver = sarif["runs"][0]["tool"]["driver"]
    assert (
        driver["name"] == "torchlint-inplace"
        and driver["informationUri"] == "https://pypi.org/project/torchlint-inplace/"
    )
    rules = {rule["id"]: rule for rule in driver["rules"]}
    assert set(rules) == {"TIP000", "TIP001", "TIP002"}  # TIP002 is not in the (fake) catalogue but was reported
    assert rules["TIP001"]["defaultConfiguration"] == {"level": "warning"}
    assert "```python\ny = x.sigmoid()\nx = x.mul(2)\n```" in rules["TIP001"]["help"]["markdown"]
    assert rules["TIP000"]["name"] == "file-not-checked"
    for result in sarif["runs"][0]["results"]:
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]


def test_sarif_results_use_relative_uris_regions_and_related_locations(sarif, tmp_path):
    run = sarif["runs"][0]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.as_uri() + "/"
    broken, saved, head = run["results"]
    assert [result["level"] for result in run["results"]] == ["error", "error", "warning"]
    assert head["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "src/mod%C3%A8le.py", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": 3, "startColumn": 5, "endLine": 5, "endColumn": 6},
    }
    assert [(related["id"], related["message"]["text"]) for related in head["relatedLocations"]] == [
        (1, "`sigmoid` saved it for backward here"),
        (2, "`h` is also read here"),
    ]
    assert saved["properties"]["consequence"] == "raises at backward"


def fingerprints(report: Report) -> list[str]:
    results = json.loads(render("sarif", report))["runs"][0]["results"]
    return [result["partialFingerprints"]["primaryLocationLineHash"] for result in results]


def test_sarif_fingerprints_survive_moved_lines_and_separate_identical_lines(tmp_path):
    path = str(tmp_path / "m.py")
    source = "x.add_(1)\nx.add_(1)\n"
    before = fingerprints(Report([not_checked(path, "m", 1), not_checked(path, "m", 2)], 1, tmp_path, {path: source}))
    after = fingerprints(
        Report([not_checked(path, "m", 3), not_checked(path, "m", 4)], 1, tmp_path, {path: "\n\n" + source})
    )
    assert before == after
    assert before[0].endswith(":1") and before[1].endswith(":2") and before[0][:-2] == before[1][:-2]
    other = fingerprints(Report([not_checked(path, "m", 1)], 1, tmp_path, {path: "x.mul_(2)\n"}))
    assert other[0] != before[0]


def test_sarif_file_outside_root_gets_absolute_uri(tmp_path):
    outside = tmp_path / "elsewhere.py"
    document = json.loads(
        render("sarif", Report([not_checked(str(outside), "unreadable")], 1, tmp_path / "project", {}))
    )
    artifact = document["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert artifact == {"uri": outside.as_uri()}
