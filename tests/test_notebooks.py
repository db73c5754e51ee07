"""Jupyter notebooks: code cells linted as one module, reported by cell, fixed and written back.

The notebooks here are built as JSON by hand (the linter reads them without nbformat);
`nbformat` only judges, in the tests, that what the fixer wrote still opens as a notebook.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner, Result
from support import every_rule

from torchlint_inplace import api, notebook
from torchlint_inplace.cli import main

REPO = Path(__file__).resolve().parent.parent
JSON_SCHEMA = json.loads((REPO / "docs" / "json-schema.json").read_text(encoding="utf-8"))

# Cell 3 saves `t` (`x * t`), cell 4 writes into it: found only when the cells are one module.
CELLS: list[tuple[str, str]] = [
    ("markdown", "# A model\n\nSome `prose`, never linted: t[:] = 0"),
    ("code", "%matplotlib inline\nimport torch\nx = torch.randn(3, requires_grad=True)"),
    ("code", "t = torch.ones(3)\ny = x * t"),
    ("code", "!pip install einops\nt[:] = 3.0\ny.sum().backward()"),
    ("raw", "t[:] = 1"),
]
MUTATION = (4, 2)  # cell 4, line 2: `t[:] = 3.0`
SAVING = (3, 2)  # cell 3, line 2: `y = x * t`


def cell(kind: str, text: str, number: int) -> dict[str, Any]:
    made: dict[str, Any] = {"cell_type": kind, "id": f"cell-{number}", "metadata": {"tags": [kind]}}
    made["source"] = text.splitlines(keepends=True)
    if kind == "code":
        made |= {"execution_count": number, "outputs": [{"output_type": "stream", "name": "stdout", "text": ["ok\n"]}]}
    return made


def document(cells: list[tuple[str, str]] = CELLS) -> dict[str, Any]:
    return {
        "cells": [cell(kind, text, number) for number, (kind, text) in enumerate(cells, start=1)],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def write_notebook(path: Path, data: dict[str, Any], indent: int | None = 1, trailing_newline: bool = True) -> Path:
    path.write_text(json.dumps(data, indent=indent) + ("\n" if trailing_newline else ""), encoding="utf-8")
    return path


def run(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(main, ["--no-cache", *args], input=input, catch_exceptions=False)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


# ----------------------------------------------------------------------------- reading and masking


def test_code_cells_are_joined_in_order_and_other_cells_left_out() -> None:
    parsed = notebook.Notebook.parse(json.dumps(document()))
    assert parsed.linted == (2, 3, 4)
    assert notebook.split(parsed.source) == {number: CELLS[number - 1][1] + "\n" for number in (2, 3, 4)}


def test_cells_run_by_a_cell_magic_are_not_linted() -> None:
    parsed = notebook.Notebook.parse(json.dumps(document([("code", "%%bash\nt[:] = 1"), ("code", "import torch")])))
    assert parsed.linted == (2,)


@pytest.mark.parametrize(
    "line",
    [
        "%matplotlib inline",
        "!pip install torch",
        "files = !ls",
        "x = %time f()",
        "torch.nn.Linear?",
        "?torch",
        "if x:\n    %time f()",
    ],
)
def test_ipython_syntax_is_masked_without_moving_anything(line: str) -> None:
    text = notebook.join({1: f"import torch\n{line}\ny = 1"})
    masked = notebook.python_source(text)
    compile(masked, "nb", "exec")
    assert [len(row) for row in masked.splitlines()] == [len(row) for row in text.splitlines()]
    assert masked.splitlines()[-1] == "y = 1"


def test_a_percent_inside_brackets_stays_the_operator() -> None:
    text = notebook.join({1: "y = (7\n%2)"})
    assert notebook.python_source(text) == text


# ----------------------------------------------------------------------------- positions in every format


def test_a_tensor_saved_in_one_cell_and_written_in_a_later_one_is_reported_by_cell(project: Path) -> None:
    write_notebook(project / "nb.ipynb", document())
    result = run("--format", "concise", "nb.ipynb")
    assert result.exit_code == 1
    (line,) = [row for row in result.stdout.splitlines() if "TIP002" in row]
    assert line.startswith(f"nb.ipynb:cell {MUTATION[0]}:{MUTATION[1]}:1: TIP002")
    assert f"cell {SAVING[0]}, line {SAVING[1]}" in line  # the saving line, named as the user finds it


def test_full_frames_show_the_lines_of_the_cell(project: Path) -> None:
    write_notebook(project / "nb.ipynb", document())
    out = run("--format", "full", "--color", "never", "nb.ipynb").stdout
    assert "torchlint-inplace cell" not in out  # the markers that join the cells never show
    assert "1 | !pip install einops\n2 | t[:] = 3.0\n" in out.replace("  |", " |")
    assert f"note: nb.ipynb:cell {SAVING[0]}:{SAVING[1]}:5:" in out


def test_json_carries_the_cell_and_rows_within_it(project: Path) -> None:
    write_notebook(project / "nb.ipynb", document())
    report = json.loads(run("--format", "json", "nb.ipynb").stdout)
    jsonschema.validate(report, JSON_SCHEMA)
    (finding,) = [item for item in report["findings"] if item["code"] == "TIP002"]
    assert (finding["cell"], finding["location"]["row"]) == MUTATION
    assert (finding["related"][0]["cell"], finding["related"][0]["location"]["row"]) == SAVING
    edit = finding["fix"]["edits"][0]
    assert edit["cell"] == MUTATION[0]


def test_sarif_regions_lie_in_the_notebook_with_the_cell_as_a_property(project: Path) -> None:
    write_notebook(project / "nb.ipynb", document())
    (result,) = json.loads(run("--format", "sarif", "nb.ipynb").stdout)["runs"][0]["results"]
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "nb.ipynb"
    region = location["region"]
    assert (region["properties"]["cell"], region["startLine"]) == MUTATION


def test_github_annotations_name_the_cell(project: Path) -> None:
    write_notebook(project / "nb.ipynb", document())
    out = run("--format", "github", "nb.ipynb").stdout
    assert f"file=nb.ipynb,line={MUTATION[1]}," in out
    assert f"(cell {MUTATION[0]})" in out


def test_noqa_works_inside_a_cell(project: Path) -> None:
    cells = [*CELLS]
    cells[3] = ("code", "t[:] = 3.0  # noqa: TIP002\ny.sum().backward()")
    write_notebook(project / "nb.ipynb", document(cells))
    assert run("nb.ipynb").exit_code == 0


# ----------------------------------------------------------------------------- fixes written back


def changed_cells(before: dict[str, Any], after: dict[str, Any]) -> list[int]:
    """The numbers of the cells that differ; asserts that nothing but their `source` does."""
    assert {key: value for key, value in before.items() if key != "cells"} == {
        key: value for key, value in after.items() if key != "cells"
    }
    assert len(before["cells"]) == len(after["cells"])
    changed = []
    for number, (old, new) in enumerate(zip(before["cells"], after["cells"], strict=True), start=1):
        assert {key: value for key, value in old.items() if key != "source"} == {
            key: value for key, value in new.items() if key != "source"
        }
        if old["source"] != new["source"]:
            changed.append(number)
    return changed


@pytest.mark.parametrize(("indent", "trailing_newline"), [(1, True), (2, False), (None, False)])
def test_fix_rewrites_only_the_fixed_cells_and_keeps_the_files_layout(
    project: Path, indent: int | None, trailing_newline: bool
) -> None:
    path = write_notebook(project / "nb.ipynb", document(), indent, trailing_newline)
    before = path.read_text(encoding="utf-8")
    result = run("--fix", "nb.ipynb")
    after = path.read_text(encoding="utf-8")
    assert result.exit_code == 0, result.output
    assert changed_cells(json.loads(before), json.loads(after)) == [MUTATION[0]]
    assert after.endswith("\n") == trailing_newline
    if indent is not None:
        assert after.splitlines()[1].startswith(" " * indent + '"') and json.dumps(
            json.loads(after), indent=indent
        ) == (after.rstrip("\n"))
    assert api.lint_source(after, project / "nb.ipynb") == []


def test_a_fixed_notebook_keeps_the_text_of_the_cells_it_did_not_touch(project: Path) -> None:
    path = write_notebook(project / "nb.ipynb", document())
    before = json.loads(path.read_text(encoding="utf-8"))
    run("--fix", "nb.ipynb")
    after = json.loads(path.read_text(encoding="utf-8"))
    assert after["cells"][MUTATION[0] - 1]["source"][0] == "!pip install einops\n"
    assert [cell["source"] for cell in after["cells"][: MUTATION[0] - 1]] == [
        cell["source"] for cell in before["cells"][: MUTATION[0] - 1]
    ]


def test_diff_shows_one_diff_per_changed_cell_and_writes_nothing(project: Path) -> None:
    path = write_notebook(project / "nb.ipynb", document())
    before = path.read_bytes()
    result = run("--diff", "nb.ipynb")
    assert result.exit_code == 1
    assert f"--- a/nb.ipynb:cell {MUTATION[0]}\n+++ b/nb.ipynb:cell {MUTATION[0]}\n" in result.stdout
    assert "cell 3" not in result.stdout.split("@@")[0]
    assert path.read_bytes() == before


def test_add_noqa_writes_the_directive_into_the_cell(project: Path) -> None:
    path = write_notebook(project / "nb.ipynb", document())
    run("--add-noqa", "nb.ipynb")
    source = json.loads(path.read_text(encoding="utf-8"))["cells"][MUTATION[0] - 1]["source"]
    assert source[MUTATION[1] - 1].rstrip().endswith("# noqa: TIP002")
    assert run("nb.ipynb").exit_code == 0


def test_the_api_reads_and_writes_a_notebooks_json(tmp_path: Path) -> None:
    text = json.dumps(document(), indent=1)
    path = tmp_path / "nb.ipynb"
    (finding,) = api.lint_source(text, path)
    assert notebook.cell_index(api.checked_text(text, path)).locate(finding.line) == MUTATION
    fixed = api.fix_source(text, path)
    assert fixed.applied == [finding] and fixed.remaining == []
    assert changed_cells(json.loads(text), json.loads(fixed.text)) == [MUTATION[0]]
    assert api.lint_source("{", path)[0].code == "TIP000"


# ----------------------------------------------------------------------------- walking, invalid notebooks


def test_directory_walks_include_notebooks_unless_configured_away(project: Path) -> None:
    write_notebook(project / "nb.ipynb", document())
    (project / "model.py").write_text("import torch\n", encoding="utf-8")
    (project / "script.pyw").write_text("import torch\n", encoding="utf-8")
    assert run("--show-files", ".").stdout.split() == ["model.py", "nb.ipynb"]
    pyproject = project / "pyproject.toml"
    pyproject.write_text("[tool.torchlint-inplace]\nextend-exclude = ['*.ipynb']\n", encoding="utf-8")
    assert run("--show-files", ".").stdout.split() == ["model.py"]
    pyproject.write_text("[tool.torchlint-inplace]\ninclude = ['*.ipynb']\nextend-include = ['*.pyw']\n")
    assert run("--show-files", ".").stdout.split() == ["nb.ipynb", "script.pyw"]


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("{not json", "invalid JSON"),
        (json.dumps({"cells": [], "nbformat": 3}), "nbformat 3"),
        (json.dumps({"nbformat": 4}), "no `cells`"),
        (json.dumps({"cells": [{"cell_type": "code", "source": 3}], "nbformat": 4}), "`source`"),
        ("[1, 2]", "no `cells`"),
        ("\xff", "not a notebook"),
    ],
)
def test_an_invalid_notebook_is_a_tip000_finding(project: Path, content: str, says: str) -> None:
    (project / "nb.ipynb").write_bytes(content.encode("latin-1" if content == "\xff" else "utf-8"))
    result = run("--format", "json", "nb.ipynb")
    assert result.exit_code == 1
    (finding,) = json.loads(result.stdout)["findings"]
    assert finding["code"] == "TIP000" and says in finding["message"]


# ----------------------------------------------------------------------------- a real tutorial notebook

# The "Learn the Basics" autograd tutorial re-made as a notebook with its outputs, plus two
# cells that write into tensors autograd saved (`# expect:` comments, as in tests/test_fixtures.py).
TUTORIAL = REPO / "fixtures" / "notebooks" / "autograd_tutorial.ipynb"
EXPECT = re.compile(r"#\s*expect:\s*(?P<codes>[A-Z0-9, ]+)")


def expected_findings(text: str) -> set[tuple[int, int, str]]:
    """(cell, line, code) of every `# expect: CODE` comment in the notebook's code cells."""
    cells = json.loads(text)["cells"]
    return {
        (number, line, code.strip())
        for number, cell in enumerate(cells, start=1)
        if cell["cell_type"] == "code"
        for line, row in enumerate("".join(cell["source"]).splitlines(), start=1)
        if (match := EXPECT.search(row))
        for code in match.group("codes").split(",")
    }


def found(text: str, path: Path) -> set[tuple[int, int, str]]:
    index = notebook.cell_index(api.checked_text(text, path))
    located = {(index.locate(finding.line), finding.code) for finding in api.lint_source(text, path, every_rule())}
    return {(*where, code) for where, code in located if where is not None}


def test_the_tutorial_notebook_has_its_expected_findings() -> None:
    text = TUTORIAL.read_text(encoding="utf-8")
    assert expected_findings(text)  # the fixture holds hazards to find
    assert found(text, TUTORIAL) == expected_findings(text)


def test_the_fixed_tutorial_is_a_valid_notebook_with_its_outputs_and_no_safe_fix_left(tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    path = tmp_path / TUTORIAL.name
    path.write_bytes(TUTORIAL.read_bytes())
    result = run("--fix", str(path))
    assert "fixed" in result.stderr + result.stdout
    text = path.read_text(encoding="utf-8")
    fixed = nbformat.reads(text, as_version=4)
    nbformat.validate(fixed)
    before = json.loads(TUTORIAL.read_text(encoding="utf-8"))
    assert len(changed_cells(before, json.loads(text))) == len(
        {cell for cell, _, _ in expected_findings(TUTORIAL.read_text())}
    )
    remaining = api.lint_source(text, path, every_rule())
    assert not [
        finding for finding in remaining if finding.fix is not None and finding.fix.applicability.value == "safe"
    ]


def run_cells(text: str) -> dict[int, BaseException | None]:
    """Runs the notebook's code cells in order in one namespace, as a kernel would (IPython's
    syntax masked); what each raised."""
    parsed = notebook.Notebook.parse(text)
    namespace: dict[str, Any] = {}
    raised: dict[int, BaseException | None] = {}
    for number, source in notebook.split(notebook.python_source(parsed.source)).items():
        try:
            exec(compile(source, f"cell {number}", "exec"), namespace)
            raised[number] = None
        except Exception as error:  # a cell's error is its output; the next cell runs
            raised[number] = error
    return raised


def test_the_tutorial_hazards_raise_when_run_and_the_fixed_notebook_runs_clean(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    text = TUTORIAL.read_text(encoding="utf-8")
    raised = run_cells(text)
    hazard_cells = {cell for cell, _, _ in expected_findings(text)}
    assert {number for number, error in raised.items() if error is not None} == hazard_cells
    assert all("modified by an inplace operation" in str(raised[number]) for number in hazard_cells)
    fixed = api.fix_source(text, TUTORIAL, every_rule())
    assert all(error is None for error in run_cells(fixed.text).values())
