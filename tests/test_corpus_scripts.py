"""scripts/corpus_check.py and scripts/check_fixed_models.py on tiny corpora: the figures they
report are right, and a broken result (a crash, a fix that no longer compiles, a model the fix
broke) is reported as such."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs the corpus scripts

REPO_ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = REPO_ROOT / "scripts"


def load_script(name: str):
    """A script imported as a module (check_fixed_models imports its sibling corpus_check)."""
    sys.path.insert(0, str(SCRIPTS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(SCRIPTS))


corpus_check = load_script("corpus_check")


def fixture_copy(tmp_path: Path, *folders: str) -> Path:
    copy = tmp_path / "corpus"
    for folder in folders:
        shutil.copytree(REPO_ROOT / "fixtures" / folder, copy / folder)
    return copy


def test_corpus_check_counts_fixes_on_fixtures(tmp_path):
    copy = fixture_copy(tmp_path, "tip001", "tip003")
    figures = corpus_check.check_copy(copy, jobs=1)
    assert figures.files == len(corpus_check.python_files(copy)) > 0
    assert figures.crashes == [] and figures.uncompilable == [] and not figures.failed
    assert len(figures.lint.report["findings"]) > 0
    assert figures.fix.report["fixed"] > 0
    assert figures.written and all((tmp_path / name).exists() for name in figures.written)
    assert len(figures.fix.report["findings"]) < len(figures.lint.report["findings"])
    lines = corpus_check.finding_lines(figures.lint.report, tmp_path)
    first = figures.lint.report["findings"][0]
    assert lines[0].startswith(
        f"{tmp_path / first['filename']}:{first['location']['row']}:{first['location']['column']} {first['code']} "
    )


def fake_linter(tmp_path: Path, body: str) -> list[str]:
    """A command standing in for torchlint-inplace, run with its arguments."""
    script = tmp_path / "fake_linter.py"
    script.write_text(textwrap.dedent(body), encoding="utf-8")
    return [sys.executable, str(script)]


def test_corpus_check_reports_a_fix_that_does_not_compile(tmp_path, monkeypatch):
    copy = fixture_copy(tmp_path, "tip003")
    monkeypatch.setattr(
        corpus_check,
        "COMMAND",
        fake_linter(
            tmp_path,
            """
        import json, pathlib, sys
        if "--fix" in sys.argv:
            for path in pathlib.Path(sys.argv[-1]).rglob("*.py"):
                path.write_text(path.read_text() + "\\ndef broken(:\\n")
        print(json.dumps({"fixed": 1, "findings": []}))
    """,
        ),
    )
    figures = corpus_check.check_copy(copy)
    assert figures.crashes == []
    assert sorted(figures.uncompilable) == sorted(figures.written) and figures.written
    assert figures.failed


def test_corpus_check_reports_crashes(tmp_path, monkeypatch):
    copy = fixture_copy(tmp_path, "tip003")
    monkeypatch.setattr(
        corpus_check,
        "COMMAND",
        fake_linter(
            tmp_path,
            """
        import json, sys
        internal = {"code": "TIP000", "filename": "corpus/a.py", "message": "internal error: KeyError: 'x'"}
        print(json.dumps({"fixed": 0, "findings": [internal]}))
        if "--fix" in sys.argv:
            print("warning: corpus/b.py: not fixed, internal error while relinting it (KeyError: 'y')", file=sys.stderr)
            print("Traceback (most recent call last):", file=sys.stderr)
            sys.exit(2)
    """,
        ),
    )
    figures = corpus_check.check_copy(copy)
    assert len(figures.lint.crashes()) == 1
    assert len(figures.fix.crashes()) == 3  # the TIP000, the relint warning, the exit code with its traceback
    assert figures.failed


ZOO_MODELS = {
    # Runs, but its in-place ReLU silently changes `h`: the fix (inplace=False) must keep it running.
    "silent": """
        import torch
        from torch import nn


        class Silent(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.act = nn.ReLU(inplace=True)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                h = self.fc(x)
                a = self.act(h)
                return a + h


        def silent(weights=None) -> Silent:
            return Silent()
    """,
    # Raises at backward until the fix makes the multiplication out of place.
    "raises": """
        import torch
        from torch import nn


        class Raises(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                h = torch.sigmoid(self.fc(x))
                h.mul_(2)
                return h


        def raises(weights=None) -> Raises:
            return Raises()
    """,
}
ZOO_REGISTRY = """
from . import raises, silent

BUILDERS = {"raises": raises.raises, "silent": silent.silent}


def list_models():
    return sorted(BUILDERS)


def get_model_builder(name):
    return BUILDERS[name]


def get_model(name, **options):
    return BUILDERS[name](**options)
"""


def tiny_torchvision(tmp_path: Path) -> Path:
    """A package named torchvision with torchvision's model registry API and two models."""
    models = tmp_path / "zoo" / "torchvision" / "models"
    models.mkdir(parents=True)
    (models.parent / "__init__.py").write_text("", encoding="utf-8")
    (models / "__init__.py").write_text(ZOO_REGISTRY, encoding="utf-8")
    for name, text in ZOO_MODELS.items():
        (models / f"{name}.py").write_text(textwrap.dedent(text), encoding="utf-8")
    return models.parent


def test_check_fixed_models_on_a_tiny_zoo(tmp_path, capsys):
    pytest.importorskip("torch")
    check_fixed_models = load_script("check_fixed_models")
    failed = check_fixed_models.check_zoo(
        "torchvision", tiny_torchvision(tmp_path), tmp_path / "scratch", 1, ["--timeout", "60"]
    )
    out = capsys.readouterr().out
    assert not failed
    assert "fixes applied: 2, files written: 2" in out
    assert "original 1/2, fixed 2/2" in out
    assert "ran before the fix, fail after it: 0" in out
    assert (
        "result changed: torchvision:raises: fed " in out
        and "but forward+backward raised RuntimeError: one of the variables" in out
    )


def test_check_fixed_models_reports_a_model_the_fix_broke(tmp_path, capsys, monkeypatch):
    pytest.importorskip("torch")
    check_fixed_models = load_script("check_fixed_models")
    real_check_copy = check_fixed_models.corpus_check.check_copy

    def breaking_fix(copy: Path, jobs: int | None = None, preview: bool = False):
        figures = real_check_copy(copy, jobs, preview)
        silent = copy / "models" / "silent.py"
        silent.write_text(silent.read_text().replace("return a + h", "raise RuntimeError('broken by the fix')"))
        return figures

    monkeypatch.setattr(check_fixed_models.corpus_check, "check_copy", breaking_fix)
    failed = check_fixed_models.check_zoo(
        "torchvision", tiny_torchvision(tmp_path), tmp_path / "scratch", 1, ["--timeout", "60"]
    )
    out = capsys.readouterr().out
    assert failed
    assert "ran before the fix, fail after it: 1" in out
    assert re.search(r"^    torchvision:silent: .*broken by the fix", out, re.MULTILINE)
    results = json.loads((tmp_path / "scratch" / "fixed" / "torchvision-results.json").read_text())
    assert not results["torchvision:silent"].startswith("ok")
