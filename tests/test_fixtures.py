"""Holds the analysis to the fixtures' ground truth, and the ground truth to torch.

Each `fixtures/**/*.py` is a small PyTorch module file whose expected findings are written as
`# expect: TIP002` comments on the reported line; every other line must stay silent. The labels
are not beliefs: each file also defines drivers that run its classes on CPU —
`raises_*` (forward + backward must hit autograd's in-place error), `safe_*` (must run clean) and
`silent_*` (runs clean but returns `(observed, reference)` that differ because of the aliasing).
Safe look-alike lines carry `# safe: <why>`. The runtime tests check every label, and that every
hazard line is executed by a raises_/silent_ driver and every safe line by a safe_ driver, so a
fixture cannot claim a behaviour nobody ran.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import io
import re
import sys
import tokenize
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType, ModuleType

import pytest
from support import every_rule

from torchlint_inplace import registry
from torchlint_inplace.api import lint_source

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# fixtures/_fixed/ holds what --fix makes of them (tests/test_fixed_fixtures.py), not fixtures.
FIXTURE_FILES = sorted(path for path in FIXTURES.rglob("*.py") if "_fixed" not in path.relative_to(FIXTURES).parts)
# Each rule of the registry has a folder of fixtures named after its code (fixtures/tip001/, ...).
RULE_CODES = frozenset(registry.codes())
RULE_FOLDERS = sorted(code.lower() for code in RULE_CODES)
DRIVER_KINDS = ("raises", "safe", "silent")

EXPECT_COMMENT = re.compile(r"#\s*expect:\s*(?P<codes>[^#]*)")
SAFE_COMMENT = re.compile(r"#\s*safe:")
# Known limitations of the analysis, kept beside the ground truth instead of hidden: a hazard line
# the analysis does not report yet carries `# expect: TIP002  # known-miss: why`, a safe line it
# wrongly reports carries `# safe: ...  # known-false-positive: TIP009 why`. The static check
# holds the analysis to exactly that, so fixing a gap makes the test ask for the marker to go.
# Each rule's documentation lists them as its known problems (`known_problems` below, read by
# scripts/gen_docs.py).
# `--preview` adds findings whose consequence the analysis cannot prove (a tensor of unknown
# provenance, say); each one a fixture's line gets with preview on is marked there,
# `# safe: why  # preview: TIP003`, so that a preview finding is as deliberate as a default one.
PREVIEW_COMMENT = re.compile(r"#\s*preview:\s*(?P<codes>TIP\d{3}(?:\s*,\s*TIP\d{3})*)")
KNOWN_MISS_COMMENT = re.compile(r"#\s*known-miss:\s*(?P<why>.*)")
KNOWN_FALSE_POSITIVE_COMMENT = re.compile(r"#\s*known-false-positive:\s*(?P<code>TIP\d{3})\s*(?P<why>.*)")

# What autograd says when an in-place write breaks it: the version-counter check at backward,
# the checks that refuse the write on the spot (leaf, view of a leaf, multi-output view, view
# made under no_grad, inference tensor), and a custom Function marking a tensor dirty that it
# does not return.
INPLACE_ERRORS = re.compile(
    "|".join(
        (
            r"modified by an inplace operation",
            r"a leaf Variable that requires grad is being used in an in-place operation",
            r"a view of a leaf Variable that requires grad is being used in an in-place operation",
            r"is a view and is being modified inplace",
            r"A view was created in no_grad mode and is being modified inplace",
            r"Inplace update to inference tensor outside InferenceMode is not allowed",
            r"Some elements marked as dirty during the forward method were not returned as output",
        )
    )
)


def _test_id(path: Path) -> str:
    return path.relative_to(FIXTURES).as_posix()


def _comment_lines(text: str, pattern: re.Pattern[str]) -> Iterator[tuple[int, re.Match[str]]]:
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT and (match := pattern.search(token.string)):
            yield token.start[0], match


def _marked_codes(text: str, pattern: re.Pattern[str]) -> Counter[tuple[int, str]]:
    """(line, code) for each code a comment of this kind lists (`# expect: TIP001, TIP003`)."""
    marked: Counter[tuple[int, str]] = Counter()
    for line, match in _comment_lines(text, pattern):
        for code in match["codes"].split(","):
            marked[(line, code.strip())] += 1
    return marked


def expected_findings(text: str) -> Counter[tuple[int, str]]:
    return _marked_codes(text, EXPECT_COMMENT)


def preview_findings(text: str) -> Counter[tuple[int, str]]:
    return _marked_codes(text, PREVIEW_COMMENT)


def reported_today(text: str) -> Counter[tuple[int, str]]:
    """What the analysis is held to: the ground truth, less known misses, plus known false positives."""
    expected = expected_findings(text)
    for line, _ in _comment_lines(text, KNOWN_MISS_COMMENT):
        for key in [key for key in expected if key[0] == line]:
            del expected[key]
    for line, match in _comment_lines(text, KNOWN_FALSE_POSITIVE_COMMENT):
        expected[(line, match["code"])] += 1
    return expected


def known_problems(text: str) -> Iterator[tuple[str, str, str]]:
    """(code, "miss" or "false-positive", why) for each known limitation a fixture records."""
    expected = expected_findings(text)
    for line, match in _comment_lines(text, KNOWN_MISS_COMMENT):
        for code in sorted({code for at, code in expected if at == line}):
            yield code, "miss", match["why"].strip()
    for _, match in _comment_lines(text, KNOWN_FALSE_POSITIVE_COMMENT):
        yield match["code"], "false-positive", match["why"].strip()


def safe_lines(text: str) -> set[int]:
    return {line for line, _ in _comment_lines(text, SAFE_COMMENT)}


def drivers(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.split("_", 1)[0] in DRIVER_KINDS
    ]


def _kind(driver: str) -> str:
    return driver.split("_", 1)[0]


# --- static: the analysis must report exactly what the fixtures say -------------------------


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=_test_id)
def test_findings_match_inline_expectations(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    findings = lint_source(text, path, every_rule())
    reported = Counter((f.line, f.code) for f in findings)
    expected = reported_today(text)
    messages = {(f.line, f.code): f.message for f in findings}

    missing = sorted((expected - reported).elements())
    unexpected = sorted((reported - expected).elements())
    problems = [f"missing   line {line} {code}" for line, code in missing]
    problems += [f"unexpected line {line} {code}: {messages[(line, code)]}" for line, code in unexpected]
    assert not problems, f"{_test_id(path)}:\n" + "\n".join(problems)


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=_test_id)
def test_preview_adds_only_the_marked_findings(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    default = Counter((f.line, f.code) for f in lint_source(text, path, every_rule()))
    with_preview = Counter((f.line, f.code) for f in lint_source(text, path, every_rule(preview=True)))
    added, marked = with_preview - default, preview_findings(text)
    problems = [f"unmarked preview finding line {line} {code}" for line, code in sorted((added - marked).elements())]
    problems += [f"marked, not reported: line {line} {code}" for line, code in sorted((marked - added).elements())]
    assert not problems, f"{_test_id(path)}:\n" + "\n".join(problems)


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=_test_id)
def test_hazard_messages_name_a_reason(path: Path) -> None:
    findings = lint_source(path.read_text(encoding="utf-8"), path, every_rule())
    vague = [
        f"line {f.line} {f.code}: {f.message}" for f in findings if f.code in RULE_CODES and "line" not in f.message
    ]
    assert not vague, "findings that do not name the saving op's or other reader's line:\n" + "\n".join(vague)


# --- meta: the fixtures themselves are well-formed ------------------------------------------


@pytest.mark.parametrize("folder", RULE_FOLDERS)
def test_rule_folder_has_hazard_and_safe_lookalike(folder: str) -> None:
    files = sorted((FIXTURES / folder).rglob("*.py"))
    texts = [path.read_text(encoding="utf-8") for path in files]
    codes = {code for text in texts for _, code in expected_findings(text)}
    assert folder.upper() in codes, f"fixtures/{folder} has no `# expect: {folder.upper()}` hazard"
    assert any(safe_lines(text) for text in texts), f"fixtures/{folder} has no `# safe:` look-alike"
    kinds = {_kind(name) for path in files for name in drivers(path)}
    assert "safe" in kinds and kinds & {"raises", "silent"}, f"fixtures/{folder} lacks hazard or safe drivers"


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=_test_id)
def test_expectations_use_known_codes(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    unknown = {code for _, code in expected_findings(text)} - RULE_CODES
    assert not unknown, f"unknown codes in `# expect:` comments: {sorted(unknown)}"
    overlap = {line for line, _ in expected_findings(text)} & safe_lines(text)
    assert not overlap, f"lines marked both `# expect:` and `# safe:`: {sorted(overlap)}"


# --- runtime: every label is what torch actually does --------------------------------------

DRIVER_CASES = [(path, name) for path in FIXTURE_FILES for name in drivers(path)]


def _package_root(path: Path) -> Path | None:
    """The outermost folder above `path` that is a package, for fixtures using relative imports."""
    root = None
    folder = path.parent
    while (folder / "__init__.py").exists():
        root, folder = folder, folder.parent
    return root


def _project_root(path: Path) -> Path | None:
    """A fixture laid out as a project of scripts beside their modules (`train.py` next to
    `utils/ops.py`, imported as `from utils.ops import scale_`): the nearest folder above it
    holding a `pyproject.toml`, as a real project's root does."""
    for folder in path.parents:
        if folder == FIXTURES:
            return None
        if (folder / "pyproject.toml").is_file():
            return folder
    return None


def fixture_root(path: Path) -> Path | None:
    """The folder whose files are one fixture unit (a script project or a package); None for a standalone file."""
    return _project_root(path) or _package_root(path)


_entered_project: list[Path] = []


def _module_places(module: ModuleType) -> list[str]:
    """Where a module lives: its file, or a namespace package's folders (one without
    `__init__.py` has no file; `utils/utils.py` of one project must not shadow another's)."""
    places = [getattr(module, "__file__", None)]
    try:
        places += list(getattr(module, "__path__", None) or ())
    except TypeError:  # `torch.classes` answers `__path__` with an object of its own
        pass
    return [place for place in places if isinstance(place, str)]


def _enter_project(root: Path) -> None:
    """Puts `root` first on `sys.path` as `python train.py` would, after forgetting the modules
    of the project entered before (two projects may both have a `utils/ops.py`)."""
    if _entered_project == [root]:
        return
    for previous in _entered_project:
        sys.path[:] = [entry for entry in sys.path if entry != str(previous)]
        for name, module in list(sys.modules.items()):
            if any(Path(place).is_relative_to(previous) for place in _module_places(module)):
                del sys.modules[name]
    _entered_project[:] = [root]
    sys.path.insert(0, str(root))


def load_fixture(path: Path) -> ModuleType:
    """Imports a fixture by path under a unique name, so same-named files never collide."""
    project = _project_root(path)
    if project is not None:
        _enter_project(project)
        return importlib.import_module(
            ".".join(path.relative_to(project).with_suffix("").parts).removesuffix(".__init__")
        )
    prefix = "fixture_" + re.sub(r"\W", "_", path.parent.relative_to(FIXTURES).as_posix())
    root = _package_root(path)
    if root is None:
        name = f"{prefix}_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    package = "fixture_pkg_" + re.sub(r"\W", "_", root.relative_to(FIXTURES).as_posix())
    if package not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            package, root / "__init__.py", submodule_search_locations=[str(root)]
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[package] = module
        spec.loader.exec_module(module)
    dotted = ".".join(path.relative_to(root).with_suffix("").parts)
    return importlib.import_module(f"{package}.{dotted}".removesuffix(".__init__"))


def run_driver(torch: ModuleType, driver: Callable[[], object], kind: str) -> None:
    torch.manual_seed(0)
    if kind == "raises":
        with pytest.raises(RuntimeError, match=INPLACE_ERRORS):
            driver()
    elif kind == "safe":
        driver()
    else:
        observed, reference = driver()
        assert observed.shape == reference.shape
        assert not torch.allclose(observed, reference), "the in-place write changed nothing"


@pytest.mark.parametrize(
    ("path", "driver"), DRIVER_CASES, ids=[f"{_test_id(path)}::{name}" for path, name in DRIVER_CASES]
)
@pytest.mark.slow  # runs the drivers under torch
def test_driver_behaves_as_labelled(path: Path, driver: str) -> None:
    torch = pytest.importorskip("torch")
    run_driver(torch, getattr(load_fixture(path), driver), _kind(driver))


def fixture_units() -> list[list[Path]]:
    """Files whose labels are checked together: a standalone file, or a whole fixture package
    (its drivers may live in one file and the labelled lines in another it imports)."""
    units: dict[Path, list[Path]] = {}
    for path in FIXTURE_FILES:
        units.setdefault(fixture_root(path) or path, []).append(path)
    return list(units.values())


def _unit_id(unit: list[Path]) -> str:
    root = fixture_root(unit[0])
    return _test_id(root) + "/" if root else _test_id(unit[0])


@contextmanager
def lines_executed(paths: list[Path]) -> Iterator[dict[str, set[int]]]:
    executed: dict[str, set[int]] = {str(path): set() for path in paths}

    def trace(frame: FrameType, event: str, arg: object):
        lines = executed.get(frame.f_code.co_filename)
        if lines is None:
            return None
        if event == "line":
            lines.add(frame.f_lineno)
        return trace

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        yield executed
    finally:
        sys.settrace(previous)


@pytest.mark.slow  # runs the drivers under torch
@pytest.mark.parametrize("unit", fixture_units(), ids=_unit_id)
def test_labelled_lines_are_run_by_matching_drivers(unit: list[Path]) -> None:
    texts = {str(path): path.read_text(encoding="utf-8") for path in unit}
    hazards = {name: {line for line, _ in expected_findings(text)} for name, text in texts.items()}
    safe = {name: safe_lines(text) for name, text in texts.items()}
    if not any(hazards.values()) and not any(safe.values()):
        pytest.skip("no labelled lines")
    assert any(drivers(path) for path in unit), "labelled lines but no raises_/safe_/silent_ drivers to run them"
    torch = pytest.importorskip("torch")
    covered = {kind: {name: set() for name in texts} for kind in DRIVER_KINDS}
    for path in unit:
        module = load_fixture(path)
        for driver in drivers(path):
            with lines_executed(unit) as executed:
                run_driver(torch, getattr(module, driver), _kind(driver))
            for name, lines in executed.items():
                covered[_kind(driver)][name] |= lines
    problems = []
    for name in texts:
        where = _test_id(Path(name))
        unrun = sorted(hazards[name] - covered["raises"][name] - covered["silent"][name])
        problems += [f"{where}:{line} `# expect:` is run by no raises_/silent_ driver" for line in unrun]
        problems += [
            f"{where}:{line} `# safe:` is run by no safe_ driver" for line in sorted(safe[name] - covered["safe"][name])
        ]
    assert not problems, "\n".join(problems)
