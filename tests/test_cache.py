"""The results cache returns what a fresh analysis would, and nothing stale.

An entry must die with a change of the file, of the settings, or of any file its findings were
read from: a callee whose summary it applied, or the package its callers were searched in.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from torchlint_inplace import config, runner
from torchlint_inplace.cache import CACHE_DIRECTORY
from torchlint_inplace.cli import main

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
BAD = "import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n    def forward(self, x):\n        y = torch.sigmoid(x)\n        y.mul_(2)\n        return y\n"


@pytest.fixture
def analysed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths analysed (not read from the cache), in order."""
    seen: list[str] = []
    real = runner.lint_source

    def spy(path, *args, **kwargs):
        seen.append(Path(path).name)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(runner, "lint_source", spy)
    return seen


def _settings(root: Path, *select: str) -> config.Settings:
    return config.resolve(config.Overrides(selection=config.Selection(select=select or None), isolated=True), cwd=root)


def _codes(results) -> dict[str, list[str]]:
    return {Path(r.path).name: [f"{f.line} {f.code}" for f in r.findings] for r in results}


def test_unchanged_files_come_from_the_cache_and_a_changed_one_is_analysed(tmp_path: Path, analysed: list[str]) -> None:
    (tmp_path / "a.py").write_text(BAD)
    (tmp_path / "b.py").write_text("x = 1\n")
    settings = _settings(tmp_path)
    paths = [tmp_path / "a.py", tmp_path / "b.py"]
    first = runner.check_files(paths, settings, use_cache=True)
    assert analysed == ["a.py", "b.py"] and _codes(first) == {"a.py": ["8 TIP001"], "b.py": []}
    second = runner.check_files(paths, settings, use_cache=True)
    assert analysed == ["a.py", "b.py"]  # nothing analysed again
    assert [(r.path, r.findings, r.text) for r in second] == [(r.path, r.findings, r.text) for r in first]
    (tmp_path / "a.py").write_text(BAD.replace("y.mul_(2)", "y = y * 2"))
    third = runner.check_files(paths, settings, use_cache=True)
    assert analysed[2:] == ["a.py"] and _codes(third) == {"a.py": [], "b.py": []}


def test_a_settings_change_misses(tmp_path: Path, analysed: list[str]) -> None:
    (tmp_path / "a.py").write_text(BAD)
    runner.check_files([tmp_path / "a.py"], _settings(tmp_path), use_cache=True)
    results = runner.check_files([tmp_path / "a.py"], _settings(tmp_path, "TIP002"), use_cache=True)
    assert analysed == ["a.py", "a.py"] and _codes(results) == {"a.py": []}


@pytest.mark.parametrize(("edited", "invalidated"), [("layers.py", "model.py"), ("model.py", "layers.py")])
def test_an_edit_invalidates_the_files_whose_findings_read_it(tmp_path: Path, analysed: list[str], edited: str, invalidated: str) -> None:
    """model.py applies layers.py's summaries; layers.py's TIP007 comes from its callers in model.py."""
    package = tmp_path / "project"
    shutil.copytree(FIXTURES / "tip007" / "project", package)
    paths = sorted(package.glob("*.py"))
    settings = _settings(tmp_path)
    before = _codes(runner.check_files(paths, settings, use_cache=True))
    assert before["layers.py"] and before["model.py"]
    analysed.clear()
    runner.check_files(paths, settings, use_cache=True)
    assert analysed == []
    target = package / edited
    target.write_text(target.read_text() + "\n# an edit\n")
    runner.check_files(paths, settings, use_cache=True)
    assert invalidated in analysed and edited in analysed


def test_callers_of_an_argument_writer_appearing_invalidate_it(tmp_path: Path, analysed: list[str]) -> None:
    package = tmp_path / "project"
    shutil.copytree(FIXTURES / "tip007" / "project", package)
    (package / "model.py").unlink()
    settings = _settings(tmp_path)
    layers = [package / "layers.py"]
    assert _codes(runner.check_files(layers, settings, use_cache=True)) == {"layers.py": []}
    shutil.copy(FIXTURES / "tip007" / "project" / "model.py", package / "model.py")
    assert _codes(runner.check_files(layers, settings, use_cache=True)) == {"layers.py": ["21 TIP007"]}


def test_the_cache_directory_ignores_itself_and_survives_damage(tmp_path: Path, analysed: list[str]) -> None:
    (tmp_path / "a.py").write_text(BAD)
    settings = _settings(tmp_path)
    runner.check_files([tmp_path / "a.py"], settings, use_cache=True)
    directory = tmp_path / CACHE_DIRECTORY
    assert (directory / ".gitignore").read_text().splitlines()[-1] == "*"
    (entry,) = directory.glob("*.json")
    json.loads(entry.read_text())
    entry.write_text("{not json")
    assert _codes(runner.check_files([tmp_path / "a.py"], settings, use_cache=True)) == {"a.py": ["8 TIP001"]}
    assert analysed == ["a.py", "a.py"]


def test_no_cache_flag_neither_reads_nor_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.py").write_text(BAD)
    monkeypatch.chdir(tmp_path)
    assert CliRunner().invoke(main, ["--isolated", "--no-cache", "a.py"]).exit_code == 1
    assert not (tmp_path / CACHE_DIRECTORY).exists()
    assert CliRunner().invoke(main, ["--isolated", "a.py"]).exit_code == 1
    assert (tmp_path / CACHE_DIRECTORY / ".gitignore").exists()


def test_an_edit_elsewhere_in_the_package_keeps_an_argument_writers_entry(tmp_path: Path, analysed: list[str]) -> None:
    """layers.py's findings depend on who imports it; a file that does not name it is no caller."""
    package = tmp_path / "project"
    shutil.copytree(FIXTURES / "tip007" / "project", package)
    (package / "other.py").write_text("x = 1\n")
    settings = _settings(tmp_path)
    paths = sorted(package.glob("*.py"))
    runner.check_files(paths, settings, use_cache=True)
    analysed.clear()
    (package / "other.py").write_text("x = 2\n")
    runner.check_files(paths, settings, use_cache=True)
    assert analysed == ["other.py"]


def test_a_warm_run_is_answered_without_starting_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cached results are looked up in the main process: forking workers would cost a warm run
    more than the lookups themselves. Only the files that miss go to the workers."""
    from torchlint_inplace import parallel

    root = tmp_path / "project"
    for index in range(runner.PARALLEL_FROM + 2):
        (root / f"m{index}.py").parent.mkdir(parents=True, exist_ok=True)
        (root / f"m{index}.py").write_text(BAD)
    settings = _settings(root)
    paths = sorted(root.glob("*.py"))
    cold = runner.check_files(paths, settings, jobs=2, use_cache=True)
    sent: list[list[Path]] = []
    real = parallel.check_in_parallel
    monkeypatch.setattr(parallel, "check_in_parallel", lambda todo, *args: sent.append(list(todo)) or real(todo, *args))
    warm = runner.check_files(paths, settings, jobs=2, use_cache=True)
    assert sent == [] and [r.findings for r in warm] == [r.findings for r in cold]
    for path in paths[: runner.PARALLEL_FROM]:
        path.write_text(BAD + "\n# edited\n")
    runner.check_files(paths, settings, jobs=2, use_cache=True)
    assert sent == [paths[: runner.PARALLEL_FROM]]
