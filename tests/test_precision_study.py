"""The precision study script counts what a plain run and a preview run find, per rule and per
line, and writes every finding out for reading."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "precision_study.py"

HAZARD = """import torch
from torch import nn


class Gate(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        s = torch.sigmoid(self.fc(x))
        s.mul_(2)
        return s
"""


def _script():
    spec = importlib.util.spec_from_file_location("precision_study", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def test_counts_lines_and_default_findings_and_writes_them(tmp_path: Path, capsys) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "gate.py").write_text(HAZARD, encoding="utf-8")
    (corpus / "empty.py").write_text("x = 1\n", encoding="utf-8")
    findings_file = tmp_path / "findings.txt"

    assert _script().main([str(corpus), "--findings", str(findings_file)]) == 0

    printed = capsys.readouterr().out
    assert "files 2, lines 14," in printed
    assert "default-on findings: 1 (71.429 per 1,000 lines)" in printed
    assert "  TIP001: 1" in printed
    lines = findings_file.read_text(encoding="utf-8").splitlines()
    assert lines[0] == f"== {corpus}"
    assert lines[1].startswith(f"{corpus / 'gate.py'}:12:9: TIP001 [default] `s.mul_()` modifies `s` in place")
    assert len(lines) == 2
