"""The results cache returns what a fresh analysis would, and nothing stale.

An entry must die with a change of the file, of the settings, or of any file its findings were
read from: a callee whose summary it applied, or the package its callers were searched in.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from torchlint_inplace import api, cache, config, linting
from torchlint_inplace.cache import CACHE_DIRECTORY
from torchlint_inplace.cli import main

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
BAD = "import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n    def forward(self, x):\n        y = torch.sigmoid(x)\n        y.mul_(2)\n        return y\n"


@pytest.fixture
def analysed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths analysed (not read from the cache), in order."""
    seen: list[str] = []
    real = linting.lint_text

    def spy(text, path, *args, **kwargs):
        seen.append(Path(path).name)
        return real(text, path, *args, **kwargs)

    monkeypatch.setattr(linting, "lint_text", spy)
    return seen


def _settings(root: Path, *select: str) -> config.Settings:
    """Defaults rooted at `root`, which is made a project (its cache lives there)."""
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    return config.resolve(config.Overrides(selection=config.Selection(select=select or None), isolated=True), cwd=root)


def check_files(paths, settings, jobs: int = 1):
    return api.lint_paths(paths, settings, jobs, cache=True).files


def _codes(results) -> dict[str, list[str]]:
    return {Path(r.path).name: [f"{f.line} {f.code}" for f in r.findings] for r in results}


def test_unchanged_files_come_from_the_cache_and_a_changed_one_is_analysed(tmp_path: Path, analysed: list[str]) -> None:
    (tmp_path / "a.py").write_text(BAD)
    (tmp_path / "b.py").write_text("x = 1\n")
    settings = _settings(tmp_path)
    paths = [tmp_path / "a.py", tmp_path / "b.py"]
    first = check_files(paths, settings)
    assert analysed == ["a.py", "b.py"] and _codes(first) == {"a.py": ["8 TIP001"], "b.py": []}
    second = check_files(paths, settings)
    assert analysed == ["a.py", "b.py"]  # nothing analysed again
    assert [(r.path, r.findings, r.text) for r in second] == [(r.path, r.findings, r.text) for r in first]
    (tmp_path / "a.py").write_text(BAD.replace("y.mul_(2)", "y = y * 2"))
    third = check_files(paths, settings)
    assert analysed[2:] == ["a.py"] and _codes(third) == {"a.py": [], "b.py": []}


def test_a_settings_change_misses(tmp_path: Path, analysed: list[str]) -> None:
    (tmp_path / "a.py").write_text(BAD)
    check_files([tmp_path / "a.py"], _settings(tmp_path))
    results = check_files([tmp_path / "a.py"], _settings(tmp_path, "TIP002"))
    assert analysed == ["a.py", "a.py"] and _codes(results) == {"a.py": []}


@pytest.mark.parametrize(("edited", "invalidated"), [("layers.py", "model.py"), ("model.py", "layers.py")])
def test_an_edit_invalidates_the_files_whose_findings_read_it(
    tmp_path: Path, analysed: list[str], edited: str, invalidated: str
) -> None:
    """model.py applies layers.py's summaries; layers.py's TIP007 comes from its callers in model.py."""
    package = tmp_path / "project"
    shutil.copytree(FIXTURES / "tip007" / "project", package)
    paths = sorted(package.glob("*.py"))
    settings = _settings(tmp_path)
    before = _codes(check_files(paths, settings))
    assert before["layers.py"] and before["model.py"]
    analysed.clear()
    check_files(paths, settings)
    assert analysed == []
    target = package / edited
    target.write_text(target.read_text() + "\n# an edit\n")
    check_files(paths, settings)
    assert invalidated in analysed and edited in analysed


def test_callers_of_an_argument_writer_appearing_invalidate_it(tmp_path: Path, analysed: list[str]) -> None:
    package = tmp_path / "project"
    shutil.copytree(FIXTURES / "tip007" / "project", package)
    (package / "model.py").unlink()
    settings = _settings(tmp_path)
    layers = [package / "layers.py"]
    assert _codes(check_files(layers, settings)) == {"layers.py": []}
    shutil.copy(FIXTURES / "tip007" / "project" / "model.py", package / "model.py")
    assert _codes(check_files(layers, settings)) == {"layers.py": ["21 TIP007"]}


def test_the_cache_directory_ignores_itself_and_survives_damage(tmp_path: Path, analysed: list[str]) -> None:
    (tmp_path / "a.py").write_text(BAD)
    settings = _settings(tmp_path)
    check_files([tmp_path / "a.py"], settings)
    directory = tmp_path / CACHE_DIRECTORY
    assert (directory / ".gitignore").read_text().splitlines()[-1] == "*"
    (entry,) = directory.glob("*.json")
    json.loads(entry.read_text())
    entry.write_text("{not json")
    assert _codes(check_files([tmp_path / "a.py"], settings)) == {"a.py": ["8 TIP001"]}
    assert analysed == ["a.py", "a.py"]


def test_no_cache_flag_neither_reads_nor_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.py").write_text(BAD)
    (tmp_path / "setup.py").write_text("")
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
    check_files(paths, settings)
    analysed.clear()
    (package / "other.py").write_text("x = 2\n")
    check_files(paths, settings)
    assert analysed == ["other.py"]


def test_a_warm_run_is_answered_without_starting_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cached results are looked up in the main process: forking workers would cost a warm run
    more than the lookups themselves. Only the files that miss go to the workers."""
    root = tmp_path / "project"
    for index in range(api.PARALLEL_FROM + 2):
        (root / f"m{index}.py").parent.mkdir(parents=True, exist_ok=True)
        (root / f"m{index}.py").write_text(BAD)
    settings = _settings(root)
    paths = sorted(root.glob("*.py"))
    cold = check_files(paths, settings, jobs=2)
    sent: list[list[Path]] = []
    real = api.check_in_parallel
    monkeypatch.setattr(
        api, "check_in_parallel", lambda todo, *args: sent.append([path for path, _ in todo]) or real(todo, *args)
    )
    warm = check_files(paths, settings, jobs=2)
    assert sent == [] and [r.findings for r in warm] == [r.findings for r in cold]
    for path in paths[: api.PARALLEL_FROM]:
        path.write_text(BAD + "\n# edited\n")
    check_files(paths, settings, jobs=2)
    assert sent == [paths[: api.PARALLEL_FROM]]


def test_each_file_is_cached_at_its_own_projects_root_never_in_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, marker in (("one", "pyproject.toml"), ("two", ".git")):
        (tmp_path / name / "src").mkdir(parents=True)
        (tmp_path / name / marker).mkdir() if marker == ".git" else (tmp_path / name / marker).write_text("")
        (tmp_path / name / "src" / "m.py").write_text(BAD)
    monkeypatch.chdir(tmp_path)
    assert CliRunner().invoke(main, ["--isolated", "one", "two"]).exit_code == 1
    assert sorted(path.relative_to(tmp_path).as_posix() for path in tmp_path.rglob(CACHE_DIRECTORY)) == [
        f"one/{CACHE_DIRECTORY}",
        f"two/{CACHE_DIRECTORY}",
    ]


def test_a_file_in_no_project_is_cached_in_the_users_cache_directory(
    tmp_path: Path, user_cache_directory: Path, analysed: list[str]
) -> None:
    (tmp_path / "loose.py").write_text(BAD)
    settings = config.resolve(config.Overrides(isolated=True), cwd=tmp_path)
    check_files([tmp_path / "loose.py"], settings)
    check_files([tmp_path / "loose.py"], settings)
    assert analysed == ["loose.py"]
    assert not list(tmp_path.rglob(CACHE_DIRECTORY))
    assert list((user_cache_directory / "torchlint-inplace").glob("*.json"))


RULE_MODULE = """\
from torchlint_inplace.rule import Rule


class Stand(Rule):
    code, name = "TIP001", "stand-in"
    summary = why = bad = good = fix_doc = brief = fix_brief = "{version}"

    def check(self, analysis):
        return iter(())
"""


def _rule_from(path: Path, version: str) -> type:
    path.write_text(RULE_MODULE.format(version=version))
    spec = importlib.util.spec_from_file_location(f"stand_in_{version}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # where inspect looks for the class's source file
    spec.loader.exec_module(module)
    return module.Stand


def test_the_key_digests_the_rules_source_so_editing_the_linter_misses(tmp_path: Path) -> None:
    """The same rule, edited: the two stand-ins share a file and differ only in its text."""
    first = _rule_from(tmp_path / "rule.py", "one")
    before = cache.code_digest((first,))
    second = _rule_from(tmp_path / "rule.py", "two")
    second.__module__, second.__qualname__ = first.__module__, first.__qualname__
    sys.modules[first.__module__] = sys.modules[second.__module__]
    assert cache.code_digest((second,)) != before


def test_the_key_digests_every_file_of_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[Path] = []
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: read.append(self) or real(self))
    cache.code_digest.cache_clear()
    cache.code_digest(())
    names = {
        path.relative_to(path.parents[1]).as_posix() if path.parent.name != "torchlint_inplace" else path.name
        for path in read
    }
    assert {
        "analysis/interpreter.py",
        "data/torch_ops.json",
        "rules/tip001_inplace_method.py",
        "linting.py",
        "api.py",
    } <= names
