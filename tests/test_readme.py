"""The README is what a fresh user trusts: its commands, examples and rule table must be true.

Each test reads the README itself, so a change in behaviour fails here until the README says
the same thing.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from torchlint_inplace import api

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")


def fenced_block(opening_line: str) -> str:
    """The body of the README's code block whose first line is `opening_line`."""
    (body,) = re.findall(rf"^```.*\n{re.escape(opening_line)}\n(.*?)^```$", README, re.MULTILINE | re.DOTALL)
    return body


def lint(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "torchlint_inplace", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


def test_ci_runs_the_readme_test_command() -> None:
    """.ci/run must run what the README tells a fresh user to run, not a private variant: each
    step of the README's test command is a line of the script, in the same order."""
    ci_lines = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    readme_commands = fenced_block(
        "python3 -m venv .venv && . .venv/bin/activate && pip install . && torchlint-inplace fixtures/"
    ).splitlines()
    (command,) = [line for line in readme_commands if line.endswith("&& pytest")]
    steps = command.split(" && ")
    assert steps[-1] == "pytest" and all(step in ci_lines for step in steps)
    assert [ci_lines.index(step) for step in steps] == sorted(ci_lines.index(step) for step in steps)


def test_ci_and_pre_commit_run_the_same_static_checks() -> None:
    ci_lines = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    hooks = re.findall(
        r"^\s+entry: (.+)$", (REPO / ".pre-commit-config.yaml").read_text(encoding="utf-8"), re.MULTILINE
    )
    static = [line for line in ci_lines if line.startswith(("ruff ", "python -m mypy", "python scripts/gen_docs.py"))]
    assert static and sorted(hooks) == sorted(static)


def test_usage_example_is_the_real_full_output(seed_files, tmp_path: Path) -> None:
    model = tmp_path / "model.py"
    model.write_text(seed_files.hazard.read_text(encoding="utf-8"), encoding="utf-8")
    result = lint("model.py", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert result.stdout == fenced_block("$ torchlint-inplace model.py"), "paste the new output into README.md"


def test_configuration_example_is_accepted(seed_files) -> None:
    pyproject = seed_files.hazard.parent / "pyproject.toml"
    pyproject.write_text("[tool.torchlint-inplace]\n" + fenced_block("[tool.torchlint-inplace]"), encoding="utf-8")
    result = lint("--verbose", seed_files.hazard.name, cwd=seed_files.hazard.parent)
    assert result.returncode == 1, result.stderr
    assert f"configuration: {pyproject}; rules: TIP001, TIP002" in result.stderr
    assert "TIP002" in result.stdout


def test_usage_error_example_is_what_is_printed(tmp_path: Path) -> None:
    result = lint("rulez", "TIP002", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == fenced_block("$ torchlint-inplace rulez TIP002"), "paste the new message into README.md"


def test_notebook_example_is_the_real_output() -> None:
    body = fenced_block("$ torchlint-inplace --format concise fixtures/notebooks/autograd_tutorial.ipynb")
    result = lint("--no-cache", "--format", "concise", "fixtures/notebooks/autograd_tutorial.ipynb", cwd=REPO)
    assert result.stdout == body


def test_stdin_examples_work_as_written(tmp_path: Path) -> None:
    seeds = tmp_path / "fixtures" / "seeds"
    seeds.mkdir(parents=True)
    seed = REPO / "fixtures" / "seeds" / "seed2_class_a.py"
    (seeds / seed.name).write_bytes(seed.read_bytes())
    lines = re.findall(r"^torchlint-inplace - .*$", README, re.MULTILINE)
    assert len(lines) == 2
    environment = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "NO_COLOR": "1"}
    checked = subprocess.run(lines[0], shell=True, cwd=tmp_path, capture_output=True, text=True, env=environment)
    assert checked.returncode == 1 and "fixtures/seeds/seed2_class_a.py:" in checked.stdout
    fixed = subprocess.run(lines[1], shell=True, cwd=tmp_path, capture_output=True, text=True, env=environment)
    assert fixed.returncode == 0, fixed.stderr
    assert (tmp_path / "fixed.py").read_text() == api.fix_source(seed.read_text(), seeds / seed.name).text
