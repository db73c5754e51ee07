"""`torchlint-inplace --confirm`: the flag, its options, the status in every output format, and
the promise that without the flag no code of the checked project runs."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

pytestmark = pytest.mark.slow  # runs project code under torch

from torchlint_inplace.cli import main
from torchlint_inplace.diagnostics import CONFIRMATION, Finding, Position, Severity, Span
from torchlint_inplace.reporters import Report, write_report

HAZARD = """\
import pathlib
import torch
from torch import nn

pathlib.Path("imported.txt").write_text("the module ran")


class Gate(nn.Module):
    def __init__(self, config: dict) -> None:
        super().__init__()
        self.fc = nn.Linear(config["width"], config["width"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = torch.sigmoid(self.fc(x))
        s.mul_(0.5)
        return s
"""
CONFIG = """\
[tool.torchlint-inplace.confirm.Gate]
args = [{ width = 3 }]
inputs = "torch.randn(2, 3)"
"""


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture()
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "gate.py").write_text(HAZARD, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(CONFIG, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_without_confirm_no_project_code_runs(project: Path) -> None:
    result = run("gate.py", "--format", "json")
    assert result.exit_code == 1
    assert "confirmation" not in json.loads(result.stdout)["findings"][0]
    assert not (project / "imported.txt").exists()


def test_confirm_runs_the_class_from_the_config_table_in_the_project_root_on_each_device(project: Path) -> None:
    torch = pytest.importorskip("torch")
    result = run("gate.py", "--confirm", "--device", "cpu,cuda", "--format", "json", "--confirm-timeout", "60")
    [finding] = json.loads(result.stdout)["findings"]
    if torch.cuda.is_available():
        assert finding["confirmation"] == "confirmed: raises"
    else:
        assert finding["confirmation"] == "cpu: confirmed: raises; cuda: not run: CUDA is not available"
    assert (project / "imported.txt").read_text(encoding="utf-8") == "the module ran"  # cwd: the project root
    assert not (project / "__pycache__").exists()  # the project is left as it was


def test_cuda_run(project: Path) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    result = run("gate.py", "--confirm", "--device", "auto", "--format", "json")
    [finding] = json.loads(result.stdout)["findings"]
    assert finding["confirmation"] == "confirmed: raises"


@pytest.mark.parametrize("value", ["gpu", "cpu,auto", ""])
def test_device_values_are_checked(project: Path, value: str) -> None:
    result = run("gate.py", "--confirm", "--device", value)
    assert result.exit_code == 2
    assert "give cpu, cuda, cpu,cuda or auto" in result.output


def test_unknown_keys_in_the_confirm_table_are_errors(project: Path) -> None:
    (project / "pyproject.toml").write_text(CONFIG + "shape = [2, 3]\n", encoding="utf-8")
    result = run("gate.py")
    assert result.exit_code == 2
    assert "unknown key 'shape' in [tool.torchlint-inplace.confirm.Gate]" in result.output


def _confirmed_report(tmp_path: Path) -> Report:
    path = tmp_path / "gate.py"
    path.write_text(HAZARD, encoding="utf-8")
    span = Span(Position(15, 8), Position(15, 17))
    finding = Finding(str(path), "TIP001", "inplace-method", "`s.mul_()` rewrites s", Severity.ERROR, span, "raises at backward", properties={CONFIRMATION: "confirmed: raises"})
    return Report([finding], 1, tmp_path, {str(path): HAZARD})


def _render(format_: str, report: Report) -> str:
    stream = io.StringIO()
    write_report(format_, report, stream, False)
    return stream.getvalue()


def test_every_format_shows_the_status(tmp_path: Path) -> None:
    report = _confirmed_report(tmp_path)
    assert "= confirm: confirmed: raises" in _render("full", report)
    assert _render("concise", report).splitlines()[0].endswith("rewrites s [confirmed: raises]")
    assert _render("github", report).splitlines()[0].endswith("[confirmed: raises]")
    assert json.loads(_render("json", report))["findings"][0]["confirmation"] == "confirmed: raises"
    result = json.loads(_render("sarif", report))["runs"][0]["results"][0]
    assert result["properties"]["confirmation"] == "confirmed: raises"


def test_json_with_a_confirmation_matches_the_schema(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).resolve().parent.parent / "docs" / "json-schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(json.loads(_render("json", _confirmed_report(tmp_path))), schema)
