"""`--confirm` as a library: findings get a status from actually running the code around them.

One `confirm_files` call (one confirmation server) runs everything, so the file's cost is one
torch import plus the runs: the fixtures' hazard lines (their label — raises or silent — comes
from running the fixture's own drivers in this process), the fixtures' safe look-alikes, small
modules that misbehave in every way a sandbox must survive, and a small package whose findings
are judged against their fixes (the fixer's edits, a stand-in edit, no fix at all).
"""

from __future__ import annotations

import ast
import json
import os
import sys
import textwrap
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs the fixtures' code under torch in a fork server

torch = pytest.importorskip("torch")

from support import every_rule  # noqa: E402
from test_fixtures import (  # noqa: E402
    FIXTURES,
    _kind,
    drivers,
    expected_findings,
    fixture_units,
    lines_executed,
    load_fixture,
    run_driver,
    safe_lines,
)

from torchlint_inplace import registry  # noqa: E402
from torchlint_inplace.api import lint_source  # noqa: E402
from torchlint_inplace.diagnostics import Applicability, Edit, Finding, Fix, Position, Severity, Span  # noqa: E402
from torchlint_inplace.runtime.confirm import ConfirmOptions, confirm_files  # noqa: E402

# The fixture folders whose labels are settled (realworld/ and precision/ are still growing).
FOLDERS = ("control_flow", "seeds", "views", *(code.lower() for code in registry.codes()))
TIMEOUT_S = 10.0

# Lines --confirm cannot run as their drivers do (hazards it cannot prove, look-alikes it cannot
# build or feed), by a piece of their text, and why.
UNPROVABLE = {
    "self.relu = nn.ReLU(inplace=True)  # expect: TIP004": (
        "the reader is an attribute of a hook object the caller registers (`saver.outputs`): --confirm runs the"
        " module without the hook"
    ),
    "x[ids] = x[ids] + h  # expect: TIP002": (
        "the rows written are picked by `ids`, an index tensor of the caller's: --confirm synthesises float inputs,"
        " and the write fails on them before it could rewrite ReLU's result"
    ),
    "self.epsilon_weight.normal_()  # expect: TIP007": (
        "the redraw breaks only a second call of the network before one backward (the loss runs it twice): --confirm"
        " runs the layer once per backward"
    ),
    "self.stored_relu = nn.ReLU(inplace=True)  # expect: TIP004": (
        "the reader is a module-level dict a forward hook fills, registered by the caller: --confirm runs the module"
        " without the hook"
    ),
    "meta_net.load_state_dict(weights_original)  # expect: TIP009": (
        "a function of a network and a list of tasks: --confirm synthesises tensors, not networks"
    ),
    "boxes[:, 2] -= boxes[:, 5] / 2  # expect: TIP007": (
        "the reader is the caller's second call (`shifted_twice`): one call of the helper on synthetic boxes shows"
        " no stale read"
    ),
    "self.tensor[:, 2] -= self.tensor[:, 5] * (origin[2] - 0)  # expect: TIP007": (
        "a plain class's constructor: --confirm runs nn.Modules, autograd.Functions and functions"
    ),
    "sample *= factor  # expect: TIP007": (
        "the reader is the dataset's next `__getitem__` of the same item: one call of the helper on a synthetic sample"
        " reads nothing stale"
    ),
    "boxes += 0.5  # expect: TIP007": (
        "the reader is the caller's second `model(**inputs)`: one forward on synthetic boxes reads nothing stale"
    ),
    "scores /= temperature  # expect: TIP007": (
        "the reader is the same call in the loop's next round: one call on synthetic scores changes nothing it reads"
    ),
    **{
        line: "a module built from a list of channel counts, its forward handed a list: nothing to synthesise them from"
        for line in (
            "x[i] = self.m[i](x[i])  # safe: a slot of the list",
            ".contiguous()  # safe: the same slot rebound",
        )
    },
    "opt_d.step()  # expect: TIP009": "a training step taking the models and optimizers: nothing to synthesise them from",
    "opt_trunk.step()  # expect: TIP009": "a training step taking the model and optimizers: nothing to synthesise them from",
    "x.pow_(2)  # expect: TIP005": "silent TIP005 (saved, then mutated and marked dirty): no run-time fix to compare with",
    "self.rectify = nn.ReLU(inplace=True)  # expect: TIP004": "the backward hook that makes the write raise is put on by a recorder the module alone does not have",
    "self.rectify = nn.ReLU(inplace=inplace)  # expect: TIP004": "the reader is a forward hook a caller registers, which the module alone does not have",
    "self.gate = nn.ReLU(inplace=inplace)  # expect: TIP004": "the reader is a forward hook a caller registers, which the module alone does not have",
    "self.squash = nn.ReLU(inplace=True)  # expect: TIP004": "the reader is a forward hook a caller registers, which the module alone does not have",
    "optimizerG.step()  # expect: TIP009": "a training function taking the models: nothing to synthesise them from",
    "self.qf_optimizer.step()  # expect: TIP009": "a method of a plain trainer object, which --confirm does not build",
    "self.value_optimizer_a.step()  # expect: TIP009": "a method of a plain agent object, which --confirm does not build",
    "self.dis_optimizer.step()  # expect: TIP009": "a helper taking the losses its caller built: synthetic tensors are no scalar losses",
    "self.dis_optimizer.step()  # safe: both backwards ran": "a helper taking the losses its caller built: synthetic tensors are no scalar losses",
    "self.gen_optimizer.step()  # safe: the same": "a helper taking the losses its caller built: synthetic tensors are no scalar losses",
    "fade_in_mel[:, :2] = fade_in_mel[:, :2] * window  # expect: TIP007": (
        "the tensor must come from a method decorated `@torch.inference_mode()`; a synthetic input is an ordinary tensor"
    ),
    "mel[:, :2] = 0  # expect: TIP002": (
        "--confirm reports the write benign though its driver raises; not yet diagnosed (the inference tensor comes"
        " from a method decorated `@torch.inference_mode()`)"
    ),
    "x += connection  # expect: TIP003": "the convolution class comes from `dimensions`, which a synthetic construction sets to 4 (`Conv4d`)",
    "x = x + connection  # safe: out of place, the ReLU's": "the convolution class comes from `dimensions`, which a synthetic construction sets to 4 (`Conv4d`)",
    "label.fill_(0.0)  # expect: TIP001": "a training function taking the model: nothing to synthesise it from",
    "target.mul_(2.0)  # expect: TIP001": "a training function taking the model: nothing to synthesise it from",
    "label.fill_(0.0)  # safe: the real loss's backward ran before the refill": "a training function taking the model: nothing to synthesise it from",
    **{
        line: (
            "the ReLU is built inside `build_from_cfg` from a config dict: the tracer blames the line calling it, not the"
            " `inplace=True` of the config the finding names"
        )
        for line in (
            'self.act = build_activation_layer(dict(type="ReLU", inplace=True))  # expect: TIP004',
            'self.act = build_from_a_fresh_registry(dict(type="Rectifier", inplace=True))  # expect: TIP004',
        )
    },
    "x.sub_(x.mean())  # expect: TIP007": (
        "the transform is built inside `build_from_cfg` from a registry's name: run on its own with a synthetic input,"
        " nothing saved that input; the caller whose sigmoid saved it is reached only through the registry"
    ),
    "spec[:, :, :width] = 0.0  # expect: TIP007": (
        "the reader is a script two files up (`train.py` through `augment.transforms`); a synthetic call of the helper"
        " has no caller that reads the spectrogram again"
    ),
}
SILENT_FORMS = frozenset({"TIP004", "TIP007", "TIP008"})
CHANGES = "confirmed: changes results"


def _finding(path: Path, line: int, code: str = "TIP001") -> Finding:
    span = Span(Position(line, 0), Position(line, 1))
    return Finding(
        path=str(path), code=code, name="test", message="test", severity=Severity.ERROR, span=span, consequence=""
    )


def _line(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if text in line)


def _labels() -> dict[tuple[str, int], set[str]]:
    """(file, line) -> kinds of the fixture drivers that run it: what the line is known to do."""
    kinds: dict[tuple[str, int], set[str]] = defaultdict(set)
    for unit in fixture_units():
        if unit[0].relative_to(FIXTURES).parts[0] not in FOLDERS:
            continue
        for path in unit:
            module = load_fixture(path)
            for driver in drivers(path):
                with lines_executed(unit) as executed:
                    run_driver(torch, getattr(module, driver), _kind(driver))
                for name, lines in executed.items():
                    for line in lines:
                        kinds[(name, line)].add(_kind(driver))
    return kinds


# A forward that forks a child which sleeps (out of the child's process group when it calls
# setsid()), and records the forked pid in `<module>.pids` beside the module.
FORKS = """
    import os
    import time
    import torch
    from torch import nn

    class Forks(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)
        def forward(self, x):
            ready, told = os.pipe()
            pid = os.fork()
            if pid == 0:
                {escape}
                os.write(told, b"1")
                time.sleep(600)
                os._exit(0)
            os.read(ready, 1)
            with open(__file__.removesuffix(".py") + ".pids", "a") as pids:
                pids.write(f"{{pid}}\\n")
            y = torch.tanh(self.fc(x))
            y.add_(1)
            return y
    """
# The same module with and without grad mode turned off at import: confirmed only with it on.
GRAD = """
    import torch
    from torch import nn
    {prelude}

    class Activated(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)
        def forward(self, x):
            y = torch.tanh(self.fc(x))
            y.add_(1)
            return y
    """
SECRET = "TORCHLINT_TEST_SECRET"
MISBEHAVING = {
    "exits_at_import.py": "import sys\nsys.exit(3)\n",
    "reads_stdin_at_import.py": "input('name? ')\n",
    "environment.py": f"""
        import json
        import os
        with open(os.path.join(os.path.dirname(__file__), "environment.json"), "w") as seen:
            json.dump({{"cwd": os.getcwd(), "secret": os.environ.get("{SECRET}"), "confirm": os.environ.get("TORCHLINT_INPLACE_CONFIRM")}}, seen)
        """,
    "exits_in_forward.py": """
        import sys
        from torch import nn

        class Exits(nn.Module):
            def forward(self, x):
                x.mul_(2)
                sys.exit(5)
        """,
    "os_exit.py": """
        import os
        from torch import nn

        class Quits(nn.Module):
            def forward(self, x):
                x.mul_(2)
                os._exit(7)
        """,
    "segfault.py": """
        import ctypes
        from torch import nn

        class Crashes(nn.Module):
            def forward(self, x):
                x.mul_(2)
                return ctypes.string_at(0)
        """,
    "chatty.py": """
        import torch
        from torch import nn

        class Chatty(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def forward(self, x):
                print("x" * 4_000_000)
                y = torch.sigmoid(self.fc(x))
                y.mul_(2)
                return y
        """,
    "forks.py": FORKS.format(escape="pass"),
    "forks_a_new_session.py": FORKS.format(escape="os.setsid()"),
    "grad_off_at_import.py": GRAD.format(prelude="torch.set_grad_enabled(False)"),
    "grad_on.py": GRAD.format(prelude=""),
    "hangs.py": """
        import time
        from torch import nn

        class Hangs(nn.Module):
            def forward(self, x):
                x.mul_(2)
                while True:
                    time.sleep(0.1)
        """,
    "models.py": """
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

        class Configured(nn.Module):
            def __init__(self, config: dict) -> None:
                super().__init__()
                self.fc = nn.Linear(config["width"], 1)
            def forward(self, x):
                s = torch.sigmoid(x)
                s.mul_(2)
                return self.fc(s)

        class Branchy(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def forward(self, x):
                if x.shape[0] > 100:
                    x.mul_(2)
                return self.fc(x)
        """,
}
# Run in this order: grad_on.py right after grad_off_at_import.py.
WRITTEN_LINES = {
    "reads_stdin_at_import.py": "input(",
    "environment.py": "import json",
    "exits_in_forward.py": "x.mul_(2)",
    "os_exit.py": "x.mul_(2)",
    "segfault.py": "x.mul_(2)",
    "chatty.py": "y.mul_(2)",
    "forks.py": "y.add_(1)",
    "forks_a_new_session.py": "y.add_(1)",
    "grad_off_at_import.py": "y.add_(1)",
    "grad_on.py": "y.add_(1)",
    "hangs.py": "x.mul_(2)",
}
# Whole lines (indentation included) of models.py, by the status they should get.
MODEL_LINES = {
    "benign": "        y.add_(1.0)",
    "unbuildable": "        x.mul_(2)",
    "configured": "        s.mul_(2)",
    "not reached": "            x.mul_(2)",
}


# A package whose findings are judged against their fixes: `model.py` imports a constant
# relatively (so must its fixed copy), and the TIP007 helper's write shows only in `net.py`'s
# caller (which must build the fixed copy's helper).
FIX_PACKAGE = {
    "__init__.py": '"""A package whose modules import each other relatively."""\n',
    "constants.py": "SLOPE = 0.1\n",
    "model.py": """
        import torch
        from torch import nn

        from .constants import SLOPE


        def scale_(x: torch.Tensor) -> torch.Tensor:
            x.mul_(2.0)
            return x


        class Activated(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.act = nn.LeakyReLU(SLOPE, inplace=True)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                h = self.fc(x)
                a = self.act(h)
                return a + h
        """,
    "net.py": """
        import torch
        from torch import nn

        from .model import scale_


        class Net(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                h = self.fc(x)
                s = scale_(h)
                return s + h
        """,
}


def _fix_jobs(project: Path) -> dict[str, Finding]:
    """The package's findings as the linter reports them (with the fixer's fixes), its TIP004
    finding with a fix that changes nothing, and both findings with no fix at all."""
    package = project / "pkg"
    package.mkdir()
    for name, text in FIX_PACKAGE.items():
        (package / name).write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    model = package / "model.py"
    found = {
        finding.code: finding for finding in lint_source(model.read_text(encoding="utf-8"), str(model), every_rule())
    }
    assert set(found) == {"TIP004", "TIP007"} and all(finding.fix is not None for finding in found.values())
    keyword = _line(model, "inplace=True")
    column = model.read_text(encoding="utf-8").splitlines()[keyword - 1].index("True")
    unchanged = Edit(Span(Position(keyword, column), Position(keyword, column + 4)), "True")
    return {
        "fixed TIP004": found["TIP004"],
        "fixed TIP007": found["TIP007"],
        "no-op fix": replace(found["TIP004"], fix=Fix("Keep `inplace=True`", (unchanged,), Applicability.UNSAFE)),
        "no fix": replace(found["TIP004"], fix=None),
        "no fix TIP007": replace(found["TIP007"], fix=None),
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Everything confirmed in one call; returns the findings by role and their statuses."""
    project = tmp_path_factory.mktemp("project")
    (project / "pyproject.toml").write_text("", encoding="utf-8")
    for name, text in MISBEHAVING.items():
        (project / name).write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    jobs: list[tuple[Path, list[Finding]]] = []
    hazards: list[Finding] = []
    safe: list[Finding] = []
    for path in sorted(FIXTURES.rglob("*.py")):
        if path.relative_to(FIXTURES).parts[0] not in FOLDERS:
            continue
        text = path.read_text(encoding="utf-8")
        expected = expected_findings(text)
        found = [f for f in lint_source(text, str(path), every_rule()) if (f.line, f.code) in expected]
        looks_alike = [_finding(path, line) for line in sorted(safe_lines(text))]
        hazards += found
        safe += looks_alike
        if found or looks_alike:
            jobs.append((path, found + looks_alike))
    written = {name: _finding(project / name, _line(project / name, text)) for name, text in WRITTEN_LINES.items()}
    written["exits_at_import.py"] = _finding(project / "exits_at_import.py", 2)
    models = project / "models.py"
    model_lines = models.read_text(encoding="utf-8").splitlines()
    model_findings = {role: _finding(models, model_lines.index(line) + 1) for role, line in MODEL_LINES.items()}
    jobs += [(finding.path, [finding]) for finding in written.values()]
    jobs.append((models, list(model_findings.values())))
    fixed = _fix_jobs(project)
    jobs += [(finding.path, [finding]) for finding in fixed.values()]  # one request each: statuses are per line
    specs = {"Configured": {"args": [{"width": 3}], "inputs": "torch.randn(2, 3)"}}
    before = _parent_state()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SECRET, "hunter2")
        statuses = confirm_files(jobs, ConfirmOptions(timeout=TIMEOUT_S, specs=specs))
    return {
        "statuses": statuses,
        "hazards": hazards,
        "safe": safe,
        "written": written,
        "models": model_findings,
        "fixed": fixed,
        "project": project,
        "parent": (before, _parent_state()),
    }


def _parent_state() -> dict:
    """What running the code under test must leave as it was in this process."""
    return {
        "cwd": os.getcwd(),
        "environment": dict(os.environ),
        "grad": torch.is_grad_enabled(),
        "dtype": torch.get_default_dtype(),
        "modules": set(sys.modules),
    }


def _text(finding: Finding) -> str:
    return Path(finding.path).read_text(encoding="utf-8").splitlines()[finding.line - 1]


def test_hazard_lines_are_confirmed_as_their_drivers_behave(run: dict) -> None:
    labels = _labels()
    problems = []
    for finding in run["hazards"]:
        status = run["statuses"][finding]
        kinds = labels[(finding.path, finding.line)]
        reason = next((why for snippet, why in UNPROVABLE.items() if snippet in _text(finding)), None)
        wanted = set()
        if "raises" in kinds:
            wanted.add("confirmed: raises")
        if "silent" in kinds and finding.code in SILENT_FORMS:
            wanted.add(CHANGES)
        if reason is not None:
            assert _kind_of(status) not in wanted, (
                f"{finding.path}:{finding.line} is now {status}: drop it from UNPROVABLE"
            )
        elif wanted and _kind_of(status) not in wanted:
            problems.append(
                f"{finding.path}:{finding.line} {finding.code} {status}, expected {' or '.join(sorted(wanted))}"
            )
        elif _kind_of(status) == CHANGES and not status.startswith(f"{CHANGES} ({_judged_against(finding)}"):
            problems.append(
                f"{finding.path}:{finding.line} {finding.code} {status}: not judged against {_judged_against(finding)}"
            )
    assert not problems, "\n".join(problems)
    assert sum(_kind_of(status) == CHANGES for status in run["statuses"].values()) >= 4


def _kind_of(status: str) -> str:
    """`confirmed: changes results (how)` -> `confirmed: changes results`."""
    return status.split(" (", 1)[0]


def _judged_against(finding: Finding) -> str:
    """How a changed result's status begins to say what it was compared with: the finding's own
    fix, else a run-time stand-in."""
    return (
        f"against its fix: {finding.fix.description})" if finding.fix is not None else "no fix to apply; against a run "
    )


def test_changes_results_are_judged_against_the_fixers_edit(run: dict) -> None:
    statuses = {role: run["statuses"][finding] for role, finding in run["fixed"].items()}
    # The fixer's edits, in a second copy of the file (its relative import resolved), and for
    # TIP007 in the caller from another file, which builds the copy's helper.
    assert statuses["fixed TIP004"] == f"{CHANGES} (against its fix: Build `self.act` with `inplace=False`)"
    assert statuses["fixed TIP007"] == f"{CHANGES} (against its fix: Clone `x` on entry to `scale_`)"
    # An edit that changes nothing changes no result: the edit ran, not a stand-in for it...
    assert statuses["no-op fix"] == "benign"
    # ...which, with no fix to apply, does show the change.
    assert statuses["no fix"] == f"{CHANGES} (no fix to apply; against a run with `inplace=False` at this line)"
    assert (
        statuses["no fix TIP007"]
        == f"{CHANGES} (no fix to apply; against a run with copies of the function's tensor arguments)"
    )


def _in_function(finding: Finding) -> bool:
    """Whether the line lies in a module-level function (a training step needing a model and
    optimizers, which --confirm cannot synthesise), not in a class."""
    tree = ast.parse(Path(finding.path).read_text(encoding="utf-8"))
    return any(
        isinstance(node, ast.FunctionDef) and node.lineno <= finding.line <= node.end_lineno for node in tree.body
    )


def test_safe_lookalikes_are_benign(run: dict) -> None:
    """None is confirmed; of those --confirm can run (a module class it can build), most ran benign
    (the rest are on paths synthetic inputs do not take, such as an inference-only branch)."""
    runnable = [
        finding
        for finding in run["safe"]
        if not (
            run["statuses"][finding].startswith("not run:")
            and (
                _in_function(finding)
                or "is not an nn.Module" in run["statuses"][finding]
                or any(snippet in _text(finding) for snippet in UNPROVABLE)
            )
        )
    ]
    problems = [
        f"{finding.path}:{finding.line} {run['statuses'][finding]}"
        for finding in runnable
        if run["statuses"][finding] not in ("benign", "not reached")
    ]
    assert not problems, "\n".join(problems)
    benign = [finding for finding in runnable if run["statuses"][finding] == "benign"]
    assert len(benign) >= 0.8 * len(runnable), [
        (f.path, f.line, run["statuses"][f]) for f in runnable if f not in benign
    ]


def test_written_modules(run: dict) -> None:
    statuses, models = run["statuses"], run["models"]
    assert statuses[models["benign"]] == "benign"
    assert statuses[models["unbuildable"]].startswith(
        "not run: cannot build constructor argument `config: dict` of Unbuildable"
    )
    assert statuses[models["configured"]] == "confirmed: raises"  # built and fed from the config table
    assert statuses[models["not reached"]] == "not reached"


def test_misbehaving_modules_are_reported_and_the_run_goes_on(run: dict) -> None:
    statuses = {name: run["statuses"][finding] for name, finding in run["written"].items()}
    assert statuses["exits_at_import.py"] == "not run: importing the file raised SystemExit: 3"
    assert statuses["os_exit.py"] == "not run: the code ended the process with exit code 7"
    assert statuses["segfault.py"].startswith("not run: the process died of SIGSEGV")
    assert statuses["chatty.py"] == "confirmed: raises"  # megabytes of output, drained and dropped
    assert statuses["forks.py"] == "confirmed: raises"  # the forked copy neither reports nor outlives the run
    assert statuses["forks_a_new_session.py"] == "confirmed: raises"
    assert statuses["hangs.py"] == f"not run: killed after the {TIMEOUT_S:g}s timeout"
    assert statuses["exits_in_forward.py"] == "not run: Exits raised SystemExit: 5"
    assert (
        statuses["reads_stdin_at_import.py"] == "not run: importing the file raised EOFError: EOF when reading a line"
    )


@pytest.mark.parametrize("name", ["forks.py", "forks_a_new_session.py"])
def test_processes_the_code_forked_do_not_outlive_the_run(run: dict, name: str) -> None:
    pids = [int(pid) for pid in (run["project"] / name.replace(".py", ".pids")).read_text().split()]
    assert pids
    # Killed with the run; reaping may lag behind, so poll a bounded number of times.
    for _ in range(600):
        if not (alive := [pid for pid in pids if _alive(pid)]):
            break
        time.sleep(0.1)
    assert not alive


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_code_runs_in_the_project_root_with_a_filtered_environment(run: dict) -> None:
    seen = json.loads((run["project"] / "environment.json").read_text())
    assert seen == {"cwd": str(run["project"]), "secret": None, "confirm": "1"}


def test_the_parent_is_unchanged(run: dict) -> None:
    before, after = run["parent"]
    added = {
        name
        for name in after["modules"] - before["modules"]
        if str(run["project"]) in str(getattr(sys.modules[name], "__file__", ""))
    }
    assert not added
    assert {key: value for key, value in after.items() if key != "modules"} == {
        key: value for key, value in before.items() if key != "modules"
    }


def test_grad_mode_set_at_import_stays_in_its_file(run: dict) -> None:
    order = list(run["written"])
    assert order.index("grad_on.py") == order.index("grad_off_at_import.py") + 1  # confirmed right after
    assert run["statuses"][run["written"]["grad_off_at_import.py"]] == "benign"  # no graph, so no error
    assert run["statuses"][run["written"]["grad_on.py"]] == "confirmed: raises"


# Forwards that allocate 16 GiB under a 2 GiB limit: at once in Python and in torch, and in
# 1 GiB steps until it fails (endless on `meta`, where allocating costs nothing).
HUNGRY = {
    "python_allocation.py": "bytearray(16 * 1024**3)",
    "torch_allocation.py": "torch.ones(4 * 1024**3)",
    "allocation_loop.py": "[torch.ones(256 * 1024**2) for _ in iter(int, 1)]",
}
MEMORY_LIMIT, MEMORY_TIMEOUT_S = 2 * 1024**3, 300.0


@pytest.fixture(scope="module")
def hungry(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Each module's status."""
    project = tmp_path_factory.mktemp("hungry")
    (project / "pyproject.toml").write_text("", encoding="utf-8")
    findings = {}
    for name, allocation in HUNGRY.items():
        text = f"import torch\nfrom torch import nn\n\nclass Hungry(nn.Module):\n    def forward(self, x):\n        held = {allocation}\n        x.mul_(2)\n        return x\n"
        (project / name).write_text(text, encoding="utf-8")
        findings[name] = _finding(project / name, 7)
    statuses = confirm_files(
        [(finding.path, [finding]) for finding in findings.values()],
        ConfirmOptions(timeout=MEMORY_TIMEOUT_S, memory_bytes=MEMORY_LIMIT),
    )
    return {name: statuses[finding] for name, finding in findings.items()}


@pytest.mark.parametrize("name", list(HUNGRY))
def test_running_out_of_memory_is_reported_promptly(hungry: dict, name: str) -> None:
    """Reported as the allocation failing under the limit, never as the timeout: a forward that
    allocates in a loop (endless on `meta`, where allocating costs nothing) must not spin until
    it is killed. The timeout is far above what any of them needs, so a busy machine cannot
    turn a prompt report into a timeout."""
    status = hungry[name]
    assert status.startswith("not run: Hungry.forward raised ") and status.endswith("(memory limit 2 GiB)"), status
    assert "MemoryError" in status or "can't allocate memory" in status
