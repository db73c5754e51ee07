"""What a fresh user gets from `pip install`: a wheel that lints on its own, without torch.

The wheel is built from a copy of the working tree (what a fresh clone would hold), installed
non-editable into a new virtualenv that has no torch, and driven only through its console
script and `python -m`. Every run of the installed tool goes through a tripwire: a fake `torch`
package first on the path that records being imported, so the static path can never import
torch unnoticed, not even inside a `try: import torch`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parent.parent
PACKAGE_ROOTS = {"torchlint_inplace": "torchlint_inplace", "rules": "torchlint_inplace/rules"}

TRIPWIRE_INIT = """\
import os
open(os.environ["TORCHLINT_TEST_TORCH_TRIPWIRE"], "w").close()
raise ImportError("the static linter imported torch")
"""


def clean_env(**extra: str) -> dict[str, str]:
    """The caller's environment without anything that would leak its own virtualenv."""
    env = {key: value for key, value in os.environ.items() if key not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"}}
    return env | extra


def run(*argv: str | Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(arg) for arg in argv],
        cwd=cwd,
        env=env if env is not None else clean_env(),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=600,
    )


def checked(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, f"{result.args} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


def working_tree_files() -> list[Path]:
    """Tracked and untracked-but-not-ignored files: what a clone of the current work would hold."""
    listing = checked(run("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=REPO)).stdout
    return [Path(name) for name in listing.split("\0") if name and (REPO / name).is_file()]


@pytest.fixture(scope="module")
def source_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Builds happen in a copy, so they neither see local build debris nor leave any in the repo."""
    root = tmp_path_factory.mktemp("clone")
    for name in working_tree_files():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, root / name)
    return root


@pytest.fixture(scope="module")
def wheel(source_copy: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    checked(run(sys.executable, "-m", "build", "--wheel", "--outdir", dist, source_copy, cwd=source_copy))
    (built,) = dist.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def fresh_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("venv")
    checked(run(sys.executable, "-m", "venv", "--clear", venv, cwd=venv))
    checked(run(venv / "bin" / "python", "-m", "pip", "install", "--quiet", wheel, cwd=venv))
    return venv


@pytest.fixture(scope="module")
def tripwire(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding a fake `torch` that leaves a marker file when imported."""
    root = tmp_path_factory.mktemp("tripwire")
    (root / "torch").mkdir()
    (root / "torch" / "__init__.py").write_text(TRIPWIRE_INIT, encoding="utf-8")
    return root


@pytest.fixture
def run_installed(fresh_venv: Path, tripwire: Path, tmp_path: Path):
    """Runs a command of the fresh virtualenv and fails the test if it imported torch."""

    def run_tool(program: str, *args: str | Path, cwd: Path = tmp_path) -> subprocess.CompletedProcess[str]:
        marker = tmp_path / "torch-was-imported"
        env = clean_env(PYTHONPATH=str(tripwire), TORCHLINT_TEST_TORCH_TRIPWIRE=str(marker), NO_COLOR="1")
        result = run(fresh_venv / "bin" / program, *args, cwd=cwd, env=env)
        assert not marker.exists(), f"{program} {args} imported torch:\n{result.stderr}"
        return result

    return run_tool


def json_findings(result: subprocess.CompletedProcess[str]) -> list[dict]:
    return json.loads(result.stdout)["findings"]


@pytest.mark.slow
def test_wheel_carries_every_engine_and_rule_file(wheel: Path, source_copy: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        shipped = set(archive.namelist())
    expected = {
        f"{installed_as}/{path.relative_to(source_copy / folder).as_posix()}"
        for folder, installed_as in PACKAGE_ROOTS.items()
        for path in (source_copy / folder).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert "torchlint_inplace/rules/__init__.py" in expected
    assert expected - shipped == set(), "add the missing packages or data to [tool.setuptools] in pyproject.toml"


@pytest.mark.slow
def test_wheel_metadata_needs_only_libcst_and_click(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        (metadata_name,) = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(archive.read(metadata_name).decode("utf-8"))
    requirements = [Requirement(line) for line in metadata.get_all("Requires-Dist")]
    unconditional = {requirement.name for requirement in requirements if requirement.marker is None}
    (torch,) = [requirement for requirement in requirements if requirement.name == "torch"]
    assert unconditional == {"libcst", "click"}
    assert torch.marker.evaluate({"extra": "runtime"}) and not torch.marker.evaluate({"extra": ""})
    assert str(torch.specifier) == "", "torch is pinned in constraints/ci.txt, never in the package"
    assert metadata["License-Expression"] == "MIT"


@pytest.mark.slow
def test_fresh_venv_has_no_torch(fresh_venv: Path) -> None:
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is not None)"
    checked(run(fresh_venv / "bin" / "python", "-c", probe, cwd=fresh_venv))


@pytest.mark.slow
def test_installed_catalogue_documents_the_rules(run_installed) -> None:
    result = checked(run_installed("torchlint-inplace", "rule", "--all"))
    for code in ("TIP001", "TIP002", "TIP003"):
        assert code in result.stdout


@pytest.mark.slow
def test_installed_linter_flags_the_seed_example_and_passes_its_fix(run_installed, seed_files) -> None:
    hazard = run_installed(
        "torchlint-inplace", "--format", "json", seed_files.hazard.name, cwd=seed_files.hazard.parent
    )
    assert hazard.returncode == 1, hazard.stderr
    (finding,) = json_findings(hazard)
    assert (finding["code"], finding["location"]["row"]) == ("TIP002", seed_files.mutation_line)
    assert seed_files.saving_line in [related["location"]["row"] for related in finding["related"]]

    clean = run_installed("torchlint-inplace", "--format", "json", seed_files.clean.name, cwd=seed_files.clean.parent)
    assert clean.returncode == 0, clean.stderr
    assert json_findings(clean) == []


@pytest.mark.slow
def test_installed_linter_runs_the_readme_quick_start_on_the_bundled_fixtures(run_installed) -> None:
    result = run_installed("torchlint-inplace", "--format", "json", "fixtures/", cwd=REPO)
    assert result.returncode == 1, result.stderr
    codes = {finding["code"] for finding in json_findings(result)}
    assert {"TIP001", "TIP002", "TIP003"} <= codes
    assert "TIP000" not in codes, "a bundled fixture could not be checked"


@pytest.mark.slow
def test_installed_module_runs_with_python_dash_m(run_installed, wheel: Path) -> None:
    version = wheel.name.split("-")[1]
    result = checked(run_installed("python", "-m", "torchlint_inplace", "--version"))
    assert version in result.stdout
