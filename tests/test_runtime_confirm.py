"""`--confirm` as a library: findings get a status from actually running their class."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

from torchlint_inplace.diagnostics import Finding, Position, Severity, Span  # noqa: E402
from torchlint_inplace.runtime.confirm import confirm_file  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _finding(path: Path, line: int, code: str = "TIP001") -> Finding:
    span = Span(Position(line, 0), Position(line, 1))
    return Finding(path=str(path), code=code, name="test", message="test", severity=Severity.ERROR, span=span, consequence="raises at backward")


def _line(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if text in line)


def test_statuses_on_fixtures_and_written_modules(tmp_path: Path) -> None:
    seed = FIXTURES / "seeds" / "seed2_class_a.py"
    module = tmp_path / "models.py"
    module.write_text(
        textwrap.dedent(
            """\
            import torch
            from torch import nn

            class Safe(nn.Module):
                def __init__(self, dim: int) -> None:
                    super().__init__()
                    self.conv = nn.Conv2d(dim, dim, 3)
                def forward(self, x):
                    y = self.conv(x)
                    y.add_(1.0)
                    return y.sigmoid()

            class Unbuildable(nn.Module):
                def __init__(self, config: dict) -> None:
                    super().__init__()
                def forward(self, x):
                    x.mul_(2)
                    return x

            class Branchy(nn.Module):
                def __init__(self) -> None:
                    super().__init__()
                    self.fc = nn.Linear(4, 4)
                def forward(self, x):
                    if x.shape[0] > 100:
                        x.mul_(2)
                    return self.fc(x)
            """
        ),
        encoding="utf-8",
    )
    findings = {
        "raises": _finding(seed, _line(seed, "t[:] = 3.0  # expect"), "TIP002"),
        "benign": _finding(module, _line(module, "y.add_(1.0)")),
        "unbuildable": _finding(module, _line(module, "x.mul_(2)")),
        "not reached": _finding(module, _line(module, "            x.mul_(2)")),
    }
    statuses = confirm_file(seed, [findings["raises"]]) | confirm_file(module, [f for k, f in findings.items() if k != "raises"])
    assert statuses[findings["raises"]] == "confirmed: raises"
    assert statuses[findings["benign"]] == "benign"
    assert statuses[findings["unbuildable"]].startswith("not run: cannot build constructor argument `config")
    assert statuses[findings["not reached"]] == "not reached"


def test_raising_fixtures_are_confirmed() -> None:
    path = FIXTURES / "tip003" / "saved_tensors.py"
    lines = [n for n, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if "# expect: TIP003" in text]
    statuses = confirm_file(path, [_finding(path, line, "TIP003") for line in lines])
    assert set(statuses.values()) == {"confirmed: raises"} and len(statuses) == len(lines)


def test_hanging_module_is_killed_at_the_timeout(tmp_path: Path) -> None:
    module = tmp_path / "hang.py"
    module.write_text(
        "import time\nfrom torch import nn\n\nclass Hang(nn.Module):\n    def forward(self):\n        while True:\n            time.sleep(0.1)\n",
        encoding="utf-8",
    )
    [status] = confirm_file(module, [_finding(module, 7)], timeout=10).values()
    assert status == "not run: killed after the 10s timeout"
