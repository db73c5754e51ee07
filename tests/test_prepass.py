"""The pre-pass may only skip files in which the full analysis finds nothing.

Every skip is checked against the real thing: the full analysis (LibCST, every rule, preview
findings included, so the default findings too: a rule reports its certain mutations always
and the others with preview) runs on each file the pre-pass skips and must report nothing.
The files are the fixtures, a sample of torch's own sources, and a generated sample
(tests/prepass_sample.py) that spells every write path of the interpreter in every setting
the pre-pass reasons about; the sample is checked to reach every write path, so a write path
the interpreter gains without the pre-pass fails here. Small cases pin down each refinement
both ways: what makes a write harmless, and the near miss that must keep the file.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Iterable
from pathlib import Path

import prepass_sample as sample
import pytest
from support import every_rule

from torchlint_inplace import registry, source
from torchlint_inplace.analysis import prepass
from torchlint_inplace.analysis.model import Form
from torchlint_inplace.analysis.torch_facts import TorchFacts
from torchlint_inplace.api import lint_source
from torchlint_inplace.rule import FormRule

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TORCH_SAMPLE_SIZE = 40


def _full_analysis(path: Path, text: str) -> list[str]:
    return [f"{f.line} {f.code}" for f in lint_source(text, path, every_rule(preview=True), prepass=False)]


def _skipped(paths: list[Path]) -> list[Path]:
    run = prepass.PrePass()
    return [path for path in paths if run.verdict(str(path), source.read(path).text).skippable]


def test_fixtures_the_prepass_skips_hold_no_finding() -> None:
    skipped = _skipped(sorted(FIXTURES.rglob("*.py")))
    assert skipped, "no fixture is skipped: this test would check nothing"
    for path in skipped:
        assert _full_analysis(path, source.read(path).text) == [], path


@pytest.mark.slow  # analyses the installed torch package
def test_torch_sources_the_prepass_skips_hold_no_finding() -> None:
    spec = importlib.util.find_spec("torch")  # locates the sources without importing torch
    if spec is None or spec.origin is None:
        pytest.skip("torch is not installed")
    files = sorted(Path(spec.origin).parent.rglob("*.py"))
    skipped = _skipped(files[:: max(1, len(files) // (4 * TORCH_SAMPLE_SIZE))])[:TORCH_SAMPLE_SIZE]
    assert len(skipped) >= TORCH_SAMPLE_SIZE // 2
    for path in skipped:
        assert _full_analysis(path, source.read(path).text) == [], path


HEADER = "import torch\nfrom torch import nn\nimport torch.nn.functional as F\n\n"

# (name, body, skippable): each skippable one is also run through the full analysis.
CASES = [
    ("no in-place code", "def f(x):\n    return x * 2\n", True),
    (
        "subscript store into a dict",
        "def f(x):\n    d = {}\n    d['a'] = x\n    n = 0\n    n += 1\n    return d\n",
        True,
    ),
    (
        "subscript store into a forward argument",
        "class M(nn.Module):\n    def forward(self, x):\n        x[0] = 1\n        return x\n",
        False,
    ),
    ("in-place method on a tensor", "def f(x):\n    y = torch.sigmoid(x)\n    y.mul_(2)\n    return y\n", False),
    (
        "in-place method on a chain from an argument",
        "def f(m):\n    m.weight.data.normal_(0, 1)\n",
        False,
    ),  # a caller may pass a module
    ("in-place method on a non-tensor chain", "def f():\n    m = {}\n    m.weight.data.normal_(0, 1)\n", True),
    ("nn.init helpers", "def init(w: torch.Tensor):\n    nn.init.normal_(w)\n    torch.nn.init.zeros_(w)\n", True),
    (
        "no_grad writes to locals",
        "class M(nn.Module):\n    @torch.no_grad()\n    def reset(self):\n        t = torch.ones(3)\n        t[0] = 2\n        t += 1\n",
        True,
    ),
    (
        "no_grad write into its object's attribute",  # its caller may have saved `self.w` (MoCo's queue)
        "class M(nn.Module):\n    @torch.no_grad()\n    def reset(self):\n        self.w.zero_()\n",
        False,
    ),
    (
        "no_grad write into an attribute's slice",
        "class M(nn.Module):\n    @torch.no_grad()\n    def push(self, k):\n        self.queue[:, 0:2] = k\n",
        False,
    ),
    ("no_grad write into its own parameter", "@torch.no_grad()\ndef clip(x):\n    x.clamp_(0, 1)\n", False),
    (
        "no_grad write into a view of its parameter",
        "@torch.no_grad()\ndef clip(x):\n    y = x.view(-1)\n    y.clamp_(0, 1)\n",
        False,
    ),
    (
        "no_grad function re-enabling grad",
        "class M(nn.Module):\n    @torch.no_grad()\n    def f(self):\n        with torch.enable_grad():\n            self.w.zero_()\n",
        False,
    ),
    (
        "no_grad function re-enabling grad under another name",
        "from torch import enable_grad as eg\n\nclass M(nn.Module):\n    @torch.no_grad()\n    def f(self):\n        with eg():\n            self.w.zero_()\n",
        False,
    ),
    (
        "nested def inside a no_grad function",
        "class M(nn.Module):\n    @torch.no_grad()\n    def f(self):\n        def g(t: torch.Tensor):\n            t.zero_()\n        return g\n",
        False,
    ),
    (
        "no_grad not imported from torch",
        "from mylib import no_grad\n\nclass M:\n    @no_grad()\n    def f(self):\n        self.w.zero_()\n",
        False,
    ),
    (
        "inplace activation module",
        "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.act = nn.ReLU(inplace=True)\n",
        False,
    ),
    (
        "inplace activation module, positional",
        "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.act = nn.ReLU(True)\n",
        False,
    ),
    ("functional inplace flag", "def f(x):\n    return F.relu(x, inplace=True)\n", False),
    ("functional without inplace", "def f(x):\n    return F.relu(x, inplace=False) + F.dropout(x, 0.1, True)\n", True),
    ("out= argument", "def f(a: torch.Tensor, b: torch.Tensor):\n    torch.mul(a, b, out=a)\n", False),
    (
        "mark_dirty",
        "class F(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n        ctx.mark_dirty(x)\n        return x\n",
        False,
    ),
    (
        "optimizer step after retained backward",
        "loss = model(x)\nloss.backward(retain_graph=True)\nopt.step()\n",
        False,
    ),
    ("aliased in-place function", "from torch import relu_ as r\n\ndef f(x):\n    r(x)\n", False),
    ("syntax error", "def f(:\n", False),
    (
        "augmented assignment of a list, a string or a comprehension",
        "class M(nn.Module):\n    def __init__(self, chs):\n        super().__init__()\n        self.info = []\n        self.info += [dict(chs=chs)]\n\n"
        "    def forward(self, x, names):\n        names += f'{x.shape}'\n        names += [n for n in names]\n        return torch.sigmoid(x)\n",
        True,
    ),
    (
        "torch call outside the tensor namespaces",
        "def f():\n    props = torch.cuda.get_device_properties(0)\n    props[0] = 1\n",
        True,
    ),
    ("torch factory", "def f():\n    t = torch.zeros(3)\n    t[0] = 1\n    return t\n", False),
    (
        "comprehension of non-tensors",
        "def f(x):\n    sizes = [n * 2 for n in range(3)]\n    sizes[0] = 1\n    return x\n",
        True,
    ),
    (
        "comprehension over a tensor",
        "def f(x):\n    parts = [p * 2 for p in x.unbind()]\n    parts[0].add_(1)\n    return parts\n",
        False,
    ),
    (
        "augmented assignment of a tensor after a list",
        "def f(x):\n    y = torch.sigmoid(x)\n    y += [1.0] and x\n    return y\n",
        False,
    ),
]


@pytest.mark.parametrize(("name", "body", "skippable"), CASES, ids=[case[0] for case in CASES])
def test_verdicts(tmp_path: Path, name: str, body: str, skippable: bool) -> None:
    path = tmp_path / "m.py"
    text = HEADER + body
    path.write_text(text)
    verdict = prepass.verdict(str(path), text)
    assert verdict.skippable is skippable, verdict.reason
    if skippable:
        assert _full_analysis(path, text) == []


def _package(tmp_path: Path, layers: str, model: str) -> Path:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "layers.py").write_text(HEADER + layers)
    (package / "model.py").write_text(HEADER + model)
    return package / "model.py"


CALLER = "from .layers import Block\n\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.block = Block()\n\n    def forward(self, x):\n        y = torch.sigmoid(x)\n        self.block(y)\n        return y\n"


def test_importing_project_code_with_an_inplace_activation_keeps_the_file(tmp_path: Path) -> None:
    layers = "class Block(nn.Module):\n    def forward(self, x):\n        return F.relu(x, inplace=True)\n"
    model = _package(tmp_path, layers, CALLER)
    verdict = prepass.verdict(str(model), model.read_text())
    assert not verdict.skippable and "inplace activation" in verdict.reason
    assert str(model.parent / "layers.py") in verdict.dependencies


def test_importing_project_code_without_one_is_skipped_and_depends_on_it(tmp_path: Path) -> None:
    layers = "class Block(nn.Module):\n    def forward(self, x):\n        return x * 2\n"
    model = _package(tmp_path, layers, CALLER)
    verdict = prepass.verdict(str(model), model.read_text())
    assert verdict.skippable and verdict.dependencies == {str(model.parent / "layers.py")}
    assert _full_analysis(model, model.read_text()) == []


def test_autograd_function_calling_project_code_that_writes_is_kept(tmp_path: Path) -> None:
    layers = "def bump(t):\n    t.add_(1)\n"
    model = "from .layers import bump\n\nclass Op(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n        bump(x)\n        return x\n"
    path = _package(tmp_path, layers, model)
    assert not prepass.verdict(str(path), path.read_text()).skippable


# ----------------------------------------------------------------------------- the generated sample


def _write(case: sample.Case, directory: Path) -> dict[str, Path]:
    for name, text in {**sample.package_files(), **case.files}.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return {name: directory / name for name in case.checked}


def _disagreements(cases: Iterable[sample.Case], tmp_path: Path) -> tuple[list[str], int, int]:
    """Each checked file of each case that the pre-pass skips although the full analysis
    reports something there; and how many files were checked and skipped."""
    found, checked, skipped = [], 0, 0
    for index, case in enumerate(cases):
        run = prepass.PrePass()  # one run per case: its files are a project of their own
        for name, path in _write(case, tmp_path / str(index)).items():
            checked += 1
            text = path.read_text(encoding="utf-8")
            if not run.verdict(str(path), text).skippable:
                continue
            skipped += 1
            findings = _full_analysis(path, text)
            if findings:
                found.append(f"{case.name} ({name}): skipped, but the analysis reports {findings}\n{text}")
    return found, checked, skipped


PARTS = {
    "canonical": lambda: [*sample.canonical_cases(), *sample.unreported_cases()],
    "torch table": sample.table_cases,
    "writes, targets and contexts": lambda: list(sample.product_cases()),
    "project calls": lambda: list(sample.project_cases()),
    "random mixtures": lambda: list(sample.random_cases(seed=0, count=300)),
}


@pytest.mark.parametrize("part", list(PARTS))
def test_the_prepass_skips_no_generated_file_with_a_finding(tmp_path: Path, part: str) -> None:
    found, checked, skipped = _disagreements(PARTS[part](), tmp_path)
    assert not found, "\n\n".join(found)
    if part not in ("canonical", "torch table"):  # those are hazards: the pre-pass keeps them all
        assert skipped >= checked // 20, f"{skipped} of {checked} files skipped: the check would check little"


@pytest.mark.slow  # about 4000 more files
def test_the_prepass_skips_no_file_with_a_finding_in_a_larger_random_sample(tmp_path: Path) -> None:
    cases = [*sample.random_cases(seed=1, count=3000), *sample.random_project_cases(seed=1, count=300)]
    found, _, skipped = _disagreements(cases, tmp_path)
    assert not found, "\n\n".join(found)
    assert skipped > 300


def test_the_sample_reaches_every_write_path(tmp_path: Path) -> None:
    """Each canonical case is a hazard the analysis reports, and together they give every
    rule's finding and every form of mutation: the sample exercises each write path the
    interpreter has. A new form, rule or torch table of writes fails here until the sample
    spells it (and so the agreement test checks the pre-pass against it)."""
    codes: set[str] = set()
    for index, case in enumerate(sample.canonical_cases()):
        path = _write(case, tmp_path / str(index))["pkg/m.py"]
        findings = lint_source(path.read_text(encoding="utf-8"), path, every_rule(preview=True), prepass=False)
        assert findings, f"{case.name}: no finding, so the sample no longer reaches this write path"
        codes.update(finding.code for finding in findings)
    assert codes == set(registry.codes())
    forms = {rule.form for rule in registry.all_rules() if issubclass(rule, FormRule) and rule.code in codes}
    assert forms == set(Form)
    tables = {field.name for field in dataclasses.fields(TorchFacts)}
    assert tables == sample.WRITE_TABLES | sample.OTHER_TABLES, "a torch table the sample does not know: is it a write?"
