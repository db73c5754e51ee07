"""Holds `--fix --unsafe-fixes` to the fixtures: the committed fixed files in fixtures/_fixed/ are
exactly what it writes, they compile, relinting them leaves only findings without a fix, a second
run changes nothing, and under torch the fixed modules no longer raise or silently differ.

fixtures/_fixed/ mirrors fixtures/: a standalone fixture with a fix applied appears as itself; a
fixture package (tip007/project/) appears whole so that it still imports. After changing fixtures
or fixes, regenerate with `python tests/test_fixed_fixtures.py` and review the diff.
"""

from __future__ import annotations

import filecmp
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import every_rule
from test_fixtures import FIXTURE_FILES, FIXTURES, _kind, drivers, fixture_root, lines_executed, load_fixture

from torchlint_inplace.api import lint_source

FIXED = FIXTURES / "_fixed"
REGENERATE = "regenerate with `python tests/test_fixed_fixtures.py` and review the diff"


def _fix_copy(destination: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """Copies the fixtures (without _fixed/) to `destination` and runs the fixer over the copy."""
    shutil.copytree(FIXTURES, destination, ignore=lambda folder, names: ["_fixed"] if Path(folder) == FIXTURES else [])
    command = [
        sys.executable,
        "-m",
        "torchlint_inplace",
        "--fix",
        "--unsafe-fixes",
        "--isolated",
        "--format",
        "concise",
        *extra,
        ".",
    ]
    return subprocess.run(command, cwd=destination, capture_output=True, text=True, timeout=600)


def _unit_files(root: Path) -> list[Path]:
    """The files of a fixture package or project: its modules, the `pyproject.toml` that makes a
    folder of scripts a project (without it the fixed copy would not import), and the data its
    drivers read (a corpus's text files)."""
    return sorted(path for path in root.rglob("*") if _is_unit_file(path))


def _is_unit_file(path: Path) -> bool:
    return path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"


def _units_changed(copy: Path) -> set[Path]:
    """Relative paths of every file of each fixture unit (file or package) the fixer changed."""
    changed = set()
    for path in FIXTURE_FILES:
        relative = path.relative_to(FIXTURES)
        if not filecmp.cmp(path, copy / relative, shallow=False):
            root = fixture_root(path)
            unit = _unit_files(root) if root is not None else [path]
            changed |= {member.relative_to(FIXTURES) for member in unit}
    return changed


@pytest.fixture(scope="module")
def fixed_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("fixed") / "fixtures"
    result = _fix_copy(copy)
    assert result.returncode in (0, 1), result.stderr
    assert "would not compile" not in result.stderr, result.stderr
    return copy


def test_fixer_writes_exactly_the_committed_fixed_files(fixed_copy: Path) -> None:
    expected = _units_changed(fixed_copy)
    committed = {path.relative_to(FIXED) for path in FIXED.rglob("*") if _is_unit_file(path)}
    assert committed == expected, f"fixtures/_fixed/ is out of date; {REGENERATE}"
    different = [
        str(path)
        for path in sorted(expected)
        if (fixed_copy / path).read_text(encoding="utf-8") != (FIXED / path).read_text(encoding="utf-8")
    ]
    assert not different, f"the fixer now writes something else for {different}; {REGENERATE}"


def test_second_run_changes_nothing(fixed_copy: Path) -> None:
    before = {path: path.read_bytes() for path in fixed_copy.rglob("*.py")}
    command = [sys.executable, "-m", "torchlint_inplace", "--diff", "--unsafe-fixes", "--isolated", "."]
    result = subprocess.run(command, cwd=fixed_copy, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0 and result.stdout == "", result.stdout + result.stderr
    assert {path: path.read_bytes() for path in fixed_copy.rglob("*.py")} == before


FIXED_FILES = sorted(FIXED.rglob("*.py"))


@pytest.mark.parametrize("path", FIXED_FILES, ids=lambda path: path.relative_to(FIXED).as_posix())
def test_fixed_file_compiles_and_keeps_only_unfixable_findings(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    compile(text, str(path), "exec", dont_inherit=True)
    fixable = [f"line {f.line} {f.code}" for f in lint_source(text, str(path), every_rule()) if f.fix is not None]
    assert not fixable, f"findings with a fix remain after fixing: {fixable}"


def test_every_fixed_file_without_unfixable_hazards_lints_clean() -> None:
    """Only TIP008/TIP009 (no fix) and hazards the fixer cannot reach may remain: a shared
    inplace module, writes through a view of another live tensor (the write is how that
    tensor changes, so rebinding or cloning the view would be wrong), and a write whose own
    right-hand side saved a view of its target (`f[i] = f[i - 1] * x`: a clone before it is
    saved and written alike; only a rewrite that stops filling a buffer helps; `x[i] = m[i](x[i])`
    over the levels of one tensor likewise), an inplace
    flag computed in a loop (`inplace=i < 2`: no literal `True` to switch off), a helper
    writing a field of the object it was given (`out.hidden.mul_()`: the caller's object), and a
    constructor writing the attribute it adopted its argument into (`self.tensor =
    torch.as_tensor(tensor)`, then `self.tensor[:, 2] -= ...`: the target is not the parameter), and
    a function that returns the argument it writes (`scale_`), which its callers may call for that
    write."""
    remaining = {}
    for path in FIXED_FILES:
        codes = {f.code for f in lint_source(path.read_text(encoding="utf-8"), str(path), every_rule())}
        if codes:
            remaining[path.relative_to(FIXED).as_posix()] = sorted(codes)
    assert remaining == {
        "views/view_then_mutate.py": ["TIP001", "TIP002", "TIP003"],
        "realworld/sigmoid_recurrence_buffer.py": ["TIP002"],
        "tip002/saved_tensors.py": ["TIP002"],
        "precision/list_grown_by_a_loop.py": ["TIP004"],
        "tip001/returned_in_a_dataclass.py": ["TIP007"],
        "tip007/adopted_by_as_tensor.py": ["TIP007"],
        "tip007/dataset_getitem_writes_stored_sample.py": ["TIP007"],
        "realworld/pix2pix_label_refilled_before_backward/train.py": ["TIP008"],
    }


# --- runtime: the fixed modules run; what raised or silently differed no longer does -----------


def _remaining_lines(unit_root: Path) -> dict[str, set[int]]:
    return {
        str(path): {f.line for f in lint_source(path.read_text(encoding="utf-8"), str(path), every_rule())}
        for path in unit_root.rglob("*.py")
    }


DRIVER_CASES = [(path, name) for path in FIXED_FILES for name in drivers(path)]


@pytest.mark.slow  # runs the fixed fixtures under torch
@pytest.mark.parametrize(
    ("path", "driver"), DRIVER_CASES, ids=[f"{p.relative_to(FIXED).as_posix()}::{d}" for p, d in DRIVER_CASES]
)
def test_fixed_driver_runs_clean(path: Path, driver: str) -> None:
    """raises_ drivers must run, silent_ drivers must now agree with their out-of-place reference;
    a driver that still runs a line with an unfixable finding keeps its original label."""
    torch = pytest.importorskip("torch")
    from test_fixtures import run_driver

    root = fixture_root(path) or path
    remaining = (
        _remaining_lines(root)
        if root.is_dir()
        else {str(path): {f.line for f in lint_source(path.read_text(encoding="utf-8"), str(path), every_rule())}}
    )
    function = getattr(load_fixture(path), driver)
    torch.manual_seed(0)
    with lines_executed(list(map(Path, remaining))) as executed:
        try:
            outcome = function()
        except RuntimeError:
            outcome = None
            raised = True
        else:
            raised = False
    still_hazardous = any(executed[name] & lines for name, lines in remaining.items())
    if still_hazardous:
        run_driver(torch, function, _kind(driver))
        return
    assert not raised, f"{driver} still raises after fixing"
    if _kind(driver) == "silent":
        observed, reference = outcome
        torch.testing.assert_close(observed, reference)


@pytest.mark.slow  # runs the fixed fixtures under torch
def test_fixed_gradients_match_an_out_of_place_reference() -> None:
    """The fixed GatedProjection computes `h * gate + 0.5 * h` with the gradients autograd gives the
    same expression written out of place by hand."""
    torch = pytest.importorskip("torch")
    fixed = load_fixture(FIXED / "tip001" / "saved_tensors.py")
    torch.manual_seed(0)
    model, x = fixed.GatedProjection(4), torch.randn(3, 4)
    model(x).sum().backward()
    h = model.proj(x)
    reference = (h * model.gate + h * 0.5).sum()
    expected = torch.autograd.grad(reference, [model.gate, model.proj.weight])
    torch.testing.assert_close(model.gate.grad, expected[0])
    torch.testing.assert_close(model.proj.weight.grad, expected[1])


@pytest.mark.slow  # runs the fixed fixtures under torch
def test_fixed_activation_module_matches_reference_outputs_and_gradients() -> None:
    torch = pytest.importorskip("torch")
    fixed = load_fixture(FIXED / "tip004" / "inplace_modules.py")
    torch.manual_seed(0)
    model, x = fixed.PreActResidual(4), torch.randn(3, 4, requires_grad=True)
    out = model(x)
    out.sum().backward()
    x2 = x.detach().requires_grad_()
    h = model.stem(x2)
    reference = model.fc(torch.relu(h)) + h
    reference.sum().backward()
    torch.testing.assert_close(out, reference)
    torch.testing.assert_close(x.grad, x2.grad)


def regenerate() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as temporary:
        copy = Path(temporary) / "fixtures"
        result = _fix_copy(copy)
        print(result.stderr, end="")
        shutil.rmtree(FIXED, ignore_errors=True)
        for relative in sorted(_units_changed(copy)):
            (FIXED / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(copy / relative, FIXED / relative)
            print(f"wrote fixtures/_fixed/{relative.as_posix()}")


if __name__ == "__main__":
    regenerate()
