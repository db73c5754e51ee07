"""`torchlint-inplace trace script.py` and `python -m torchlint_inplace.trace`: a user's crashing
script comes back with the saving and the mutating line, and everything else passes through."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

pytestmark = pytest.mark.slow  # runs scripts under torch

pytest.importorskip("torch")

from conftest import SEED_HAZARD, SeedFiles  # noqa: E402

from torchlint_inplace.cli import main  # noqa: E402
from torchlint_inplace.runtime.script import run_script  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SEED2_FIXTURE = REPO / "fixtures" / "seeds" / "seed2_class_a.py"

GAN_SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=1)
steps = parser.parse_args().steps

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8), nn.Tanh())
D = nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
opt_g = torch.optim.Adam(G.parameters(), lr=2e-4)
opt_d = torch.optim.Adam(D.parameters(), lr=2e-4)

for step in range(steps):
    real = torch.randn(32, 8)
    fake = G(torch.randn(32, 4))
    d_fake = D(fake)
    loss_d = F.softplus(d_fake).mean() + F.softplus(-D(real)).mean()
    opt_d.zero_grad()
    loss_d.backward(retain_graph=True)
    opt_d.step()
    loss_g = F.softplus(-d_fake).mean()
    opt_g.zero_grad()
    loss_g.backward()
    opt_g.step()
    print("step", step, "done")
"""


def _line_of(text: str, code: str) -> int:
    return next(number for number, line in enumerate(text.splitlines(), 1) if line.strip() == code)


def _run(*argv: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run([str(arg) for arg in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def _console_script() -> str:
    return str(Path(sys.executable).parent / "torchlint-inplace")


def test_seed2_script_names_both_lines(seed_files: SeedFiles, tmp_path: Path) -> None:
    """The seed as its author ran it: module-level `y = A()(); y.backward()`."""
    script = tmp_path / "seed.py"
    script.write_text(SEED_HAZARD + "\ny = A()()\ny.backward()\n", encoding="utf-8")
    result = _run(_console_script(), "trace", script, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert f"seed.py:{seed_files.saving_line} in A.forward" in result.stderr
    assert f"seed.py:{seed_files.mutation_line} in A.forward" in result.stderr
    assert "> " + str(seed_files.mutation_line) + " |         t[:] = 3.0" in result.stderr
    assert "TIP002" in result.stderr and "Traceback" not in result.stderr


def test_seed2_fixture_under_python_m(tmp_path: Path) -> None:
    script = tmp_path / "run_seed.py"
    script.write_text(
        f"import runpy\nrunpy.run_path({str(SEED2_FIXTURE)!r})['raises_seed_script']()\n", encoding="utf-8"
    )
    result = _run(sys.executable, "-m", "torchlint_inplace.trace", script, cwd=tmp_path)
    text = SEED2_FIXTURE.read_text(encoding="utf-8")
    assert result.returncode == 1, result.stderr
    assert f"seed2_class_a.py:{_line_of(text, 'y = self.x * t')} in A.forward" in result.stderr
    assert f"seed2_class_a.py:{_line_of(text, 't[:] = 3.0  # expect: TIP002')} in A.forward" in result.stderr


@pytest.mark.parametrize("fail_fast", [False, True], ids=["at-backward", "fail-fast"])
def test_gan_two_optimizers_script(tmp_path: Path, fail_fast: bool) -> None:
    script = tmp_path / "train_gan.py"
    script.write_text(GAN_SCRIPT, encoding="utf-8")
    result = _run(
        _console_script(), "trace", *(["--fail-fast"] if fail_fast else []), script, "--steps", "3", cwd=tmp_path
    )
    assert result.returncode == 1, result.stderr
    assert "step 0 done" not in result.stdout
    assert f"train_gan.py:{_line_of(GAN_SCRIPT, 'd_fake = D(fake)')} in <module>" in result.stderr
    assert f"train_gan.py:{_line_of(GAN_SCRIPT, 'opt_d.step()')} in <module>" in result.stderr
    assert "TIP009" in result.stderr and ("refused" in result.stderr) is fail_fast


def test_script_sees_its_argv_main_and_folder_and_exit_code_passes_through(tmp_path: Path, capsys) -> None:
    (tmp_path / "helper_module_for_trace.py").write_text("VALUE = 7\n", encoding="utf-8")
    script = tmp_path / "script.py"
    script.write_text(
        textwrap.dedent(
            """\
            import sys
            import helper_module_for_trace
            print(sys.argv, __name__, helper_module_for_trace.VALUE)
            sys.exit(int(sys.argv[1]))
            """
        ),
        encoding="utf-8",
    )
    argv_before = sys.argv[:]
    assert run_script(str(script), ["3", "--flag"]) == 3
    assert capsys.readouterr().out == f"[{str(script)!r}, '3', '--flag'] __main__ 7\n"
    assert run_script(str(script), ["0"]) == 0
    assert sys.argv == argv_before and str(tmp_path) not in sys.path


def test_clean_script_exits_zero_and_missing_script_is_a_usage_error(tmp_path: Path) -> None:
    script = tmp_path / "clean.py"
    script.write_text(
        "import torch\nx = torch.randn(3, requires_grad=True)\ny = x.sigmoid()\ny.sum().backward()\n", encoding="utf-8"
    )
    runner = CliRunner()
    assert runner.invoke(main, ["trace", str(script)]).exit_code == 0
    missing = runner.invoke(main, ["trace", str(tmp_path / "nope.py")])
    assert missing.exit_code == 2 and "no such script" in missing.output


def test_trace_without_torch_says_so(monkeypatch, tmp_path: Path) -> None:
    for name in [name for name in sys.modules if name.startswith("torchlint_inplace.runtime")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "torch", None)
    script = tmp_path / "any.py"
    script.write_text("", encoding="utf-8")
    result = CliRunner().invoke(main, ["trace", str(script)])
    assert result.exit_code == 2
    assert "needs torch" in result.output


LEAF_SCRIPT = """\
import torch
from torch import nn


def clip_weights(model):
    for p in model.parameters():
        p.clamp_(-0.1, 0.1)


model = nn.Linear(3, 1)
clip_weights(model)
"""

SILENT_SCRIPT = """\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        h = self.fc(x)
        out = self.act(h)
        return out + h


Block()(torch.randn(2, 4)).sum().backward()
print("trained")
"""

# What the trace report never shows: the frames of the CLI, of runpy and of the tracer itself.
INTERNAL_FRAMES = ("click", "runpy", "torchlint_inplace/", "Traceback")


def test_refusal_at_the_write_is_explained_without_internal_frames(tmp_path: Path) -> None:
    script = tmp_path / "clip.py"
    script.write_text(LEAF_SCRIPT, encoding="utf-8")
    result = _run(_console_script(), "trace", script, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    report = result.stderr[result.stderr.index("torchlint-inplace trace: ") :]
    assert report.startswith(
        "torchlint-inplace trace: a leaf Variable that requires grad is being used in an in-place operation."
    )
    assert f"clip.py:{_line_of(LEAF_SCRIPT, 'p.clamp_(-0.1, 0.1)')} in clip_weights" in report
    assert f"clip.py:{_line_of(LEAF_SCRIPT, 'clip_weights(model)')} in <module>" in report  # called from
    assert "why: `p` is a leaf that requires grad (an nn.Parameter)" in report and "torch.no_grad()" in report
    assert not [marker for marker in INTERNAL_FRAMES if marker in report], report


def test_silent_corruption_is_reported_after_the_scripts_output_and_fails_only_when_asked(tmp_path: Path) -> None:
    script = tmp_path / "block.py"
    script.write_text(SILENT_SCRIPT, encoding="utf-8")
    result = _run(_console_script(), "trace", script, cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == "trained\n", result.stderr
    report = result.stderr[result.stderr.index("torchlint-inplace trace: ") :]
    assert report.startswith("torchlint-inplace trace: silent corruption: the in-place `ReLU` at line 13 rewrote `h`")
    for code in ("out = self.act(h)", "return out + h", "self.act = nn.ReLU(inplace=True)"):
        assert f"block.py:{_line_of(SILENT_SCRIPT, code)}" in report
    assert "1 silent corruption report (the exit code ignores them" in report
    assert not [marker for marker in INTERNAL_FRAMES if marker in report], report
    strict = _run(_console_script(), "trace", "--fail-on-silent", script, cwd=tmp_path)
    assert strict.returncode == 1 and "the exit code ignores" not in strict.stderr


def test_json_report_goes_to_the_output_file(tmp_path: Path) -> None:
    script = tmp_path / "block.py"
    script.write_text(SILENT_SCRIPT, encoding="utf-8")
    output = tmp_path / "report.json"
    result = _run(
        sys.executable, "-m", "torchlint_inplace.trace", "--format", "json", "-o", output, script, cwd=tmp_path
    )
    assert result.returncode == 0 and "torchlint-inplace trace" not in result.stderr, result.stderr
    document = json.loads(output.read_text(encoding="utf-8"))
    assert (document["version"], document["exit_code"], document["error"]) == (1, 0, None)
    [silent] = document["silent"]
    assert (silent["kind"], silent["rule"], silent["write"]["line"]) == (
        "caller-reads-written",
        "TIP004",
        _line_of(SILENT_SCRIPT, "out = self.act(h)"),
    )
    assert (
        silent["built"]["code"] == "self.act = nn.ReLU(inplace=True)"
        and silent["related"][0]["code"] == "return out + h"
    )
    leaf = tmp_path / "clip.py"
    leaf.write_text(LEAF_SCRIPT, encoding="utf-8")
    result = _run(_console_script(), "trace", "--format", "json", leaf, cwd=tmp_path)
    error = json.loads(result.stderr[result.stderr.index("{") :])["error"]
    assert (
        result.returncode == 1
        and error["kind"] == "refused-leaf"
        and error["mutation"]["code"] == "p.clamp_(-0.1, 0.1)"
    )
    assert error["rule"] == "TIP001" and error["tensor"]["name"] == "p" and "why" in error


KEPT_SCRIPT = """\
import torch


def normalize(image):
    image.sub_(0.5).div_(0.2)
    return image


def shift(x):
    x += 1.0
    return x * 2


class Images:
    def __init__(self):
        self.data = torch.rand(2, 3)

    def __getitem__(self, index):
        image = normalize(self.data[index])
        return image


def kept_shifted():
    x = torch.zeros(3)
    y = shift(x)
    return x


images = Images()
epochs = [images[0] for epoch in range(2)]
kept = kept_shifted()
"""


def test_json_report_has_the_state_and_return_reads(tmp_path: Path) -> None:
    """The silent reports a later frame of an object or a `return` completes are in the document too."""
    script = tmp_path / "kept.py"
    script.write_text(KEPT_SCRIPT, encoding="utf-8")
    output = tmp_path / "report.json"
    assert run_script(str(script), [], format="json", output=str(output)) == 0
    silent = json.loads(output.read_text(encoding="utf-8"))["silent"]
    found = {
        (report["kind"], report["write"]["code"], tuple(related["code"] for related in report["related"]))
        for report in silent
    }
    assert found == {
        (
            "state-read-again",
            "image.sub_(0.5).div_(0.2)",
            ("image = normalize(self.data[index])", "image = normalize(self.data[index])"),
        ),
        ("caller-reads-written", "x += 1.0", ("return x",)),
    }


def test_other_crashes_print_the_scripts_traceback_without_runner_frames(tmp_path: Path) -> None:
    script = tmp_path / "crash.py"
    script.write_text("def load():\n    raise ValueError('no such checkpoint')\n\nload()\n", encoding="utf-8")
    result = _run(_console_script(), "trace", script, cwd=tmp_path)
    printed = result.stderr[result.stderr.index("Traceback (most recent call last):") :]
    assert result.returncode == 1
    assert printed.splitlines()[1].strip().endswith('crash.py", line 4, in <module>') and printed.endswith(
        "ValueError: no such checkpoint\n"
    )
    assert "runpy" not in printed and "click" not in printed and "torchlint_inplace" not in printed
