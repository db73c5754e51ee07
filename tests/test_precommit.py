"""The pre-commit hook, for real: pre-commit builds the hook's own environment from this
repository (`try-repo` takes uncommitted changes to tracked files too) and runs it on a
temporary git project, as a user's `git commit` would.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
HOOK_ID = "torchlint-inplace"

pytestmark = pytest.mark.slow


def env_without_git_state(**extra: str) -> dict[str, str]:
    """No inherited GIT_DIR & co. (as inside a git hook), no leaked virtualenv."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("GIT_") and key not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"}
    }
    return env | extra


@pytest.fixture
def try_hook(tmp_path: Path):
    """Runs this repository's hook on one file of a fresh git project.

    try-repo builds the hook's environment in a throwaway store of its own; PRE_COMMIT_HOME
    keeps whatever else pre-commit writes out of the user's ~/.cache.
    """
    project = tmp_path / "project"
    project.mkdir()
    env = env_without_git_state(PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"), NO_COLOR="1")
    subprocess.run(["git", "init", "--quiet", str(project)], env=env, check=True)

    def run_hook(source: Path) -> subprocess.CompletedProcess[str]:
        target = project / source.name
        target.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
        subprocess.run(["git", "add", target.name], cwd=project, env=env, check=True)
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "pre_commit",
                "try-repo",
                str(REPO),
                HOOK_ID,
                "--files",
                target.name,
                "--color",
                "never",
            ],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=600,
        )

    return run_hook


def test_hook_fails_on_a_hazardous_file(try_hook, seed_files) -> None:
    result = try_hook(seed_files.hazard)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Failed" in result.stdout
    assert f"{seed_files.hazard.name}:{seed_files.mutation_line}:" in result.stdout
    assert "TIP002" in result.stdout


def test_hook_passes_on_a_clean_file(try_hook, seed_files) -> None:
    result = try_hook(seed_files.clean)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Passed" in result.stdout


def test_hook_checks_a_notebook(try_hook) -> None:
    """`types_or: [python, jupyter]`: pre-commit hands the hook notebooks too."""
    result = try_hook(REPO / "fixtures" / "notebooks" / "autograd_tutorial.ipynb")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "autograd_tutorial.ipynb:cell " in result.stdout
