"""Golden outputs: every reporter's exact text for the files under tests/golden/inputs/,
through the command as users run it (discovery, analysis, fixes offered, paths, summary).

Any change to what a format prints — a field renamed, a path shown differently, a summary
reworded, a rule's message or documentation (SARIF carries the catalogue), the version —
fails here, so that it is made on purpose. After such a change:

    python tests/test_golden.py      # rewrites tests/golden/<format>.* from the current code

and review `git diff tests/golden/` before committing it.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from torchlint_inplace import cli

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "golden"
INPUTS = GOLDEN / "inputs"
GOLDEN_FILES = {
    "full": "full.txt",
    "concise": "concise.txt",
    "json": "report.json",
    "sarif": "report.sarif",
    "github": "github.txt",
}
JSON_SCHEMA = REPO / "docs" / "json-schema.json"
SARIF_SCHEMA = REPO.parent / "shared" / "data" / "sarif-schema-2.1.0.json"  # beside the checkout, never copied into it
REGENERATE = "python tests/test_golden.py"


# SARIF names the checkout's absolute location (originalUriBaseIds): the one machine-dependent
# text in any format, stored under this stand-in.
CHECKOUT_URI, CHECKOUT_STAND_IN = REPO.as_uri() + "/", "file:///checkout/"


def render(format: str) -> str:
    """The report of `format` for the golden inputs, run from the repository root so that
    paths are shown as `tests/golden/inputs/...` on every machine."""
    with contextlib.chdir(REPO):
        result = CliRunner().invoke(
            cli.main,
            ["--isolated", "--no-cache", "--jobs", "1", "--format", format, INPUTS.relative_to(REPO).as_posix()],
        )
    assert result.exit_code == 1, result.output  # the inputs hold findings
    return result.stdout.replace(CHECKOUT_URI, CHECKOUT_STAND_IN)


@pytest.mark.parametrize("format", list(GOLDEN_FILES))
def test_output_matches_golden(format: str) -> None:
    expected = (GOLDEN / GOLDEN_FILES[format]).read_text(encoding="utf-8")
    assert render(format) == expected, f"{format} output changed; if on purpose, run `{REGENERATE}` and review the diff"


def test_goldens_cover_every_reporter() -> None:
    assert set(GOLDEN_FILES) == set(cli.REPORTERS)


def test_goldens_hold_findings_errors_and_no_machine_paths() -> None:
    """The inputs exercise what each format must show (a finding of several rules, related
    locations, safe and unsafe fixes, an unparsable file), and no absolute path leaks in."""
    report = json.loads((GOLDEN / GOLDEN_FILES["json"]).read_text(encoding="utf-8"))
    findings = report["findings"]
    assert {finding["code"] for finding in findings} >= {"TIP000", "TIP001", "TIP002", "TIP003", "TIP004"}
    assert all(finding["related"] for finding in findings if finding["code"] != "TIP000")
    assert {finding["fix"]["applicability"] for finding in findings if finding["fix"]} == {"safe", "unsafe"}
    assert not any("clean.py" in finding["filename"] for finding in findings)
    for name in GOLDEN_FILES.values():
        assert str(REPO) not in (GOLDEN / name).read_text(encoding="utf-8")


def test_json_golden_matches_documented_schema() -> None:
    schema = json.loads(JSON_SCHEMA.read_text(encoding="utf-8"))
    jsonschema.validate(json.loads((GOLDEN / GOLDEN_FILES["json"]).read_text(encoding="utf-8")), schema)


def test_sarif_golden_matches_official_schema() -> None:
    if not SARIF_SCHEMA.exists():
        pytest.skip(f"the OASIS SARIF 2.1.0 schema is not beside the checkout ({SARIF_SCHEMA})")
    schema = json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))
    jsonschema.validate(json.loads((GOLDEN / GOLDEN_FILES["sarif"]).read_text(encoding="utf-8")), schema)


def regenerate() -> None:
    for format, name in GOLDEN_FILES.items():
        (GOLDEN / name).write_text(render(format), encoding="utf-8", newline="\n")
        print(f"wrote {(GOLDEN / name).relative_to(REPO)}")


if __name__ == "__main__":
    regenerate()
