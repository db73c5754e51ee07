"""`torchlint-inplace - --stdin-filename PATH`: an editor's buffer checked as if it were that file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from support import SIGMOID_HAZARD

from torchlint_inplace import api
from torchlint_inplace.cli import main

HAZARD = SIGMOID_HAZARD
MUTATION_LINE = 8


def run(*args: str, input: bytes | str) -> Result:
    return CliRunner().invoke(main, ["--no-cache", *args], input=input, catch_exceptions=False)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_stdin_is_reported_under_the_name_given(project: Path) -> None:
    result = run("--format", "concise", "-", "--stdin-filename", "src/model.py", input=HAZARD)
    assert result.exit_code == 1
    assert result.stdout.startswith(f"src/model.py:{MUTATION_LINE}:9: TIP002")
    assert not (project / "src").exists()


def test_stdin_filename_alone_reads_stdin(project: Path) -> None:
    result = run("--format", "concise", "--stdin-filename", "model.py", input=HAZARD)
    assert result.stdout.startswith(f"model.py:{MUTATION_LINE}:9: TIP002")


def test_the_settings_and_per_file_ignores_of_that_path_apply(project: Path) -> None:
    (project / "proj").mkdir()
    (project / "proj" / "pyproject.toml").write_text(
        "[tool.torchlint-inplace]\n[tool.torchlint-inplace.per-file-ignores]\n'gen/*.py' = ['TIP002']\n"
    )
    assert run("-", "--stdin-filename", "proj/gen/model.py", input=HAZARD).exit_code == 0
    assert run("-", "--stdin-filename", "proj/src/model.py", input=HAZARD).exit_code == 1


def test_noqa_applies_on_stdin(project: Path) -> None:
    silenced = HAZARD.replace("y[0] = 0.0", "y[0] = 0.0  # noqa: TIP002")
    assert run("-", "--stdin-filename", "model.py", input=silenced).exit_code == 0


def test_fix_prints_the_fixed_source_on_stdout_and_the_report_on_stderr(project: Path) -> None:
    result = run("-", "--stdin-filename", "model.py", "--fix", input=HAZARD)
    assert result.exit_code == 0
    assert result.stdout == api.fix_source(HAZARD, project / "model.py").text != HAZARD
    assert "1 fixed" in result.stderr
    assert not (project / "model.py").exists()


def test_fix_with_nothing_to_fix_echoes_the_source(project: Path) -> None:
    clean = "import torch\n\nx = torch.ones(3)\n"
    result = run("-", "--stdin-filename", "model.py", "--fix", input=clean)
    assert (result.exit_code, result.stdout) == (0, clean)


def test_diff_on_stdin_shows_the_fix_under_the_name(project: Path) -> None:
    result = run("-", "--stdin-filename", "model.py", "--diff", input=HAZARD)
    assert result.exit_code == 1
    assert result.stdout.startswith("--- a/model.py\n+++ b/model.py\n")


def test_a_notebook_on_stdin_is_read_as_a_notebook(project: Path) -> None:
    cells = [
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": source}
        for source in (HAZARD.split("\n\n\n")[0], "\n\n" + HAZARD.split("\n\n\n")[1])
    ]
    text = json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    result = run("--format", "concise", "-", "--stdin-filename", "nb.ipynb", input=text)
    assert result.stdout.startswith(f"nb.ipynb:cell 2:{MUTATION_LINE - 2}:9: TIP002")
    fixed = run("-", "--stdin-filename", "nb.ipynb", "--fix", input=text)
    assert json.loads(fixed.stdout)["cells"][1]["source"] != cells[1]["source"]


def test_undecodable_stdin_is_a_tip000_finding(project: Path) -> None:
    result = run("--format", "concise", "-", "--stdin-filename", "model.py", input=b"x = '\xff'\n")
    assert result.exit_code == 1
    assert result.stdout.startswith("model.py:1:1: TIP000")


def test_stdin_cannot_be_combined_with_paths(project: Path) -> None:
    result = run("-", "other.py", input=HAZARD)
    assert result.exit_code == 2
    assert "standard input" in result.stderr
