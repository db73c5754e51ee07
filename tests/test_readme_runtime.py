"""The README's examples of the culprit tracer and the pytest plugin are real: each script shown
is run as shown, and its output must be the one printed beside it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs torch in subprocesses

pytest.importorskip("torch")

from test_readme import fenced_block  # noqa: E402

# torch warns at import where NumPy is missing; a user's terminal may not, the README does not.
ENVIRONMENT = {
    **{key: value for key, value in os.environ.items() if key != "PYTHONPATH"},
    "PYTHONWARNINGS": "ignore::UserWarning",
}


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, env=ENVIRONMENT, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("script", ["train.py", "residual.py"])
def test_trace_examples_are_the_real_output(script: str, tmp_path: Path) -> None:
    (tmp_path / script).write_text(fenced_block(f"# {script}"), encoding="utf-8")
    result = _run([str(Path(sys.executable).parent / "torchlint-inplace"), "trace", script], tmp_path)
    assert result.returncode == (1 if script == "train.py" else 0), result.stderr
    assert result.stdout + result.stderr == fenced_block(f"$ torchlint-inplace trace {script}"), (
        "paste the new output into README.md"
    )


def test_pytest_example_is_the_real_output(tmp_path: Path) -> None:
    (tmp_path / "test_clip.py").write_text(fenced_block("# test_clip.py"), encoding="utf-8")
    result = _run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=",
            "--torchlint-inplace",
            "test_clip.py",
        ],
        tmp_path,
    )
    assert result.returncode == 1, result.stdout
    shown = fenced_block("$ pytest --torchlint-inplace test_clip.py")
    assert shown.startswith("...\n")
    assert shown.removeprefix("...\n") in result.stdout, "paste the new output into README.md"
