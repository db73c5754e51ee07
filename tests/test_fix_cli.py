"""`--fix`, `--unsafe-fixes`, `--diff` and `--show-fixes` from the command line: what is written,
what is printed, exit codes, and files kept as they were (encoding, newlines, permissions)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

# One safe fix (`h` is an exclusive local) and one unsafe one (`x` is an argument).
MODEL = """\
import torch
from torch import nn


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = torch.sigmoid(self.fc(x))
        h.mul_(2)
        y = x * self.fc.weight
        x += 1
        return h + y
"""
SAFE_LINE, SAFE_FIXED = "        h.mul_(2)\n", "        h = h.mul(2)\n"
UNSAFE_LINE, UNSAFE_FIXED = "        x += 1\n", "        x = x + 1\n"
CLEAN = "import torch\n\n\ndef f(x):\n    return x + 1\n"


def lint(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "torchlint_inplace", "--isolated", *args]
    return subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"}, timeout=120
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "model.py").write_text(MODEL, encoding="utf-8")
    (tmp_path / "clean.py").write_text(CLEAN, encoding="utf-8")
    return tmp_path


def test_fix_applies_only_safe_fixes_and_says_what_remains(project: Path) -> None:
    clean_before = os.stat(project / "clean.py")
    result = lint(project, "--fix", ".")
    text = (project / "model.py").read_text(encoding="utf-8")
    assert SAFE_FIXED in text and UNSAFE_LINE in text
    assert result.returncode == 1
    assert "Found 2 errors (1 fixed, 1 remaining (1 fixable with --unsafe-fixes); 2 files checked)." in result.stdout
    assert os.stat(project / "clean.py").st_mtime_ns == clean_before.st_mtime_ns  # a file without fixes is not written


def test_unsafe_fixes_apply_the_rest_and_exit_clean(project: Path) -> None:
    result = lint(project, "--fix", "--unsafe-fixes", "--show-fixes", "model.py")
    text = (project / "model.py").read_text(encoding="utf-8")
    assert SAFE_FIXED in text and UNSAFE_FIXED in text
    assert result.returncode == 0, result.stdout
    assert "Found 2 errors (2 fixed, 0 remaining)." in result.stdout
    assert (
        "Fixed 2 errors:\n- model.py:\n" in result.stderr and "1 × TIP001 (Rewrite as `h = h.mul(2)`)" in result.stderr
    )
    again = lint(project, "--fix", "--unsafe-fixes", "model.py")
    assert again.returncode == 0 and "All checks passed!" in again.stdout
    assert (project / "model.py").read_text(encoding="utf-8") == text


def test_diff_prints_and_writes_nothing(project: Path) -> None:
    result = lint(project, "--diff", ".")
    assert result.returncode == 1
    assert "--- a/model.py\n+++ b/model.py\n" in result.stdout
    assert f"-{SAFE_LINE}+{SAFE_FIXED}" in result.stdout and "x = x + 1" not in result.stdout
    assert result.stderr == "Would fix 1 error (1 more with --unsafe-fixes).\n"  # x += 1's fix is unsafe
    unsafe = lint(project, "--diff", "--unsafe-fixes", ".")
    assert "x = x + 1" in unsafe.stdout and unsafe.stderr == "Would fix 2 errors.\n"
    assert (project / "model.py").read_text(encoding="utf-8") == MODEL
    nothing = lint(project, "--diff", "clean.py")
    assert nothing.returncode == 0 and nothing.stdout == ""


def test_full_report_says_whether_a_fix_is_safe(project: Path) -> None:
    result = lint(project, "model.py")
    assert "= fix: [*] Rewrite as `h = h.mul(2)` (safe)" in result.stdout
    assert "= fix: Rewrite as `x = x + 1` (unsafe, use --unsafe-fixes)" in result.stdout


def test_json_output_stays_json_with_show_fixes(project: Path) -> None:
    import json

    result = lint(project, "--fix", "--show-fixes", "--format", "json", "model.py")
    document = json.loads(result.stdout)
    assert [finding["code"] for finding in document["findings"]] == ["TIP003"]


def test_fixed_file_keeps_encoding_bom_newlines_and_permissions(tmp_path: Path) -> None:
    text = "# -*- coding: latin-1 -*-\n# caf\xe9\n" + MODEL
    data = b"\xef\xbb\xbf" + text.replace("# -*- coding: latin-1 -*-\n", "").replace("\n", "\r\n").encode("utf-8")
    latin = tmp_path / "latin.py"
    latin.write_bytes(text.encode("latin-1"))
    bom = tmp_path / "bom.py"
    bom.write_bytes(data)
    os.chmod(bom, 0o751)
    result = lint(tmp_path, "--fix", ".")
    assert result.returncode == 1, result.stderr
    assert latin.read_bytes() == text.replace(SAFE_LINE, SAFE_FIXED).encode("latin-1")
    assert bom.read_bytes() == data.replace(
        SAFE_LINE.replace("\n", "\r\n").encode(), SAFE_FIXED.replace("\n", "\r\n").encode()
    )
    assert stat.S_IMODE(os.stat(bom).st_mode) == 0o751
    assert sorted(path.name for path in tmp_path.glob("*.py")) == ["bom.py", "latin.py"]
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left behind


def test_a_file_whose_relint_fails_is_left_unfixed_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from torchlint_inplace import cli
    from torchlint_inplace.fixes import run as fix_run

    broken, fine = tmp_path / "broken.py", tmp_path / "fine.py"
    broken.write_text(MODEL)
    fine.write_text(MODEL)
    real = fix_run.fix_file

    def fix_file(path, text, findings, relint, unsafe):
        def failing(new_text):
            if path.name == "broken.py":
                raise KeyError("boom")
            return relint(new_text)

        return real(path, text, findings, failing, unsafe)

    monkeypatch.setattr(fix_run, "fix_file", fix_file)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli.main, ["--isolated", "--fix", "--format", "concise", "broken.py", "fine.py"])
    assert result.exit_code == 1, result.output
    assert "broken.py: not fixed, internal error while relinting it (KeyError" in result.stderr
    assert broken.read_text() == MODEL
    assert SAFE_FIXED in fine.read_text()
