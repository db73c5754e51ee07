"""Fuzzing: no input file may crash the linter or make `--fix` write code that does not parse.

Two sources of inputs: hypothesmith's grammar-generated programs (valid Python nobody would
write), and our fixtures mutated the ways real files are broken (deleted lines, swapped
tokens, random bytes, deep nesting, very long lines, mixed tabs and spaces, CRLF or lone CR,
a BOM, form feeds, other encodings with and without a coding cookie, null bytes).

For every input the oracle asserts that
- `linting.Checker.check` returns (nothing escapes) and reports no "internal error" TIP000: an
  exception of ours turned into a finding is still a crash found;
- the CLI with `--fix --unsafe-fixes` exits 0 or 1 with no traceback, and leaves the file
  byte for byte as it was or writes a file that compiles.

The budget is a hypothesis profile: "ci" (the default, a few hundred inputs, well under a
minute) or "long" (`python scripts/fuzz.py`, see docs/reliability.md). Minimal crashing inputs
found so far are kept below as regression cases.
"""

from __future__ import annotations

import os
import random
import re
import warnings
from collections.abc import Callable
from pathlib import Path

import hypothesmith
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import check_file, every_rule

from torchlint_inplace.cli import main
from torchlint_inplace.diagnostics import NOT_CHECKED_CODE
from torchlint_inplace.linting import INTERNAL_ERROR

pytestmark = pytest.mark.slow  # fuzzing

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
FIXTURE_FILES = sorted(path for path in FIXTURES.rglob("*.py") if "_fixed" not in path.parts)

_COMMON = dict(deadline=None, suppress_health_check=list(HealthCheck), database=None, derandomize=False)
settings.register_profile("ci", max_examples=int(os.environ.get("FUZZ_EXAMPLES", 100)), **_COMMON)
settings.register_profile("long", max_examples=int(os.environ.get("FUZZ_EXAMPLES", 5000)), **_COMMON)
settings.load_profile(os.environ.get("FUZZ_PROFILE", "ci"))

ALL_RULES = every_rule(preview=True)


# --- the oracle -----------------------------------------------------------------------------


def compiles(data: bytes) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(data, "<fixed>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def assert_checks_cleanly(path: Path) -> None:
    """check_file returns, and any TIP000 it reports is a clean per-file error, not our bug."""
    result = check_file(path, ALL_RULES, prepass=False)
    internal = [
        f.message for f in result.findings if f.code == NOT_CHECKED_CODE and f.message.startswith(INTERNAL_ERROR)
    ]
    assert not internal, f"{internal[0]}\n{result.traceback}"
    assert result.traceback is None


def assert_fix_is_sound(path: Path) -> None:
    """The CLI exits 0 or 1 without a traceback and leaves the file as it was or compiling."""
    before = path.read_bytes()
    run = CliRunner().invoke(
        main,
        [
            "--isolated",
            "--no-cache",
            "--preview",
            "--select",
            "ALL",
            "--jobs",
            "1",
            "--fix",
            "--unsafe-fixes",
            "--format",
            "concise",
            str(path),
        ],
    )
    assert run.exception is None or isinstance(run.exception, SystemExit), repr(run.exception)
    assert run.exit_code in (0, 1), run.output
    assert "Traceback" not in run.output and "internal error" not in run.output, run.output
    after = path.read_bytes()
    assert after == before or compiles(after), after.decode("utf-8", "replace")


def assert_robust(directory: Path, data: bytes) -> None:
    path = directory / "fuzzed.py"
    path.write_bytes(data)
    assert_checks_cleanly(path)
    assert_fix_is_sound(path)


# --- mutations of the fixtures --------------------------------------------------------------

Mutation = Callable[[random.Random, bytes], bytes]
_TOKEN = re.compile(rb"\w+|[^\w\s]+")


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True) or [b""]


def delete_lines(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    for _ in range(rng.randint(1, 3)):
        if len(lines) > 1:
            del lines[rng.randrange(len(lines))]
    return b"".join(lines)


def swap_tokens(rng: random.Random, data: bytes) -> bytes:
    tokens = list(_TOKEN.finditer(data))
    if len(tokens) < 2:
        return data
    first, second = sorted(rng.sample(tokens, 2), key=lambda match: match.start())
    return (
        data[: first.start()]
        + second.group()
        + data[first.end() : second.start()]
        + first.group()
        + data[second.end() :]
    )


def random_bytes(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        at = rng.randrange(len(out) + 1)
        out[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
    return bytes(out)


# Expression chains as deep as the other shapes: the analysis handles them (see the regressions).
ANALYSED_CHAIN_DEPTH = 3000


def deep_nesting(rng: random.Random, data: bytes) -> bytes:
    """Brackets and blocks past Python's own limits (200 brackets, 100 indents) and chains."""
    depth = rng.choice((50, 150, 3000))
    chain = min(depth, ANALYSED_CHAIN_DEPTH)
    blocks = min(depth, 120)
    shapes = (
        b"y = " + b"(" * depth + b"x" + b")" * depth + b"\n",
        b"y = " + b"f(" * depth + b"x" + b")" * depth + b"\n",
        b"y = " + b"[" * depth + b"x" + b"]" * depth + b"\n",
        b"y = x" + b" + x" * chain + b"\n",
        b"y = x" + b".relu()" * chain + b"\n",
        b"".join(b" " * level + b"if x:\n" for level in range(blocks)) + b" " * blocks + b"x.add_(1)\n",
        b"def f(x):\n"
        + b"".join(b" " * (level + 1) + b"with torch.no_grad():\n" for level in range(blocks))
        + b" " * (blocks + 1)
        + b"x += 1\n",
    )
    lines = _lines(data)
    lines.insert(rng.randrange(len(lines) + 1), rng.choice(shapes))
    return b"".join(lines)


def long_line(rng: random.Random, data: bytes) -> bytes:
    length = rng.choice((10_000, 100_000))
    # A literal of many elements is a long line and a wide tree: the tree costs seconds per
    # 10,000 elements (LibCST's visits), so the list is kept to a few thousand here.
    shapes = (
        b"s = '" + b"a" * length + b"'\n",
        b"t = torch.tensor([" + b"1," * (length // 40) + b"])\n",
        b"#" + b" x" * (length // 2) + b"\n",
    )
    lines = _lines(data)
    lines.insert(rng.randrange(len(lines) + 1), rng.choice(shapes))
    return b"".join(lines)


def mixed_indentation(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    for index in rng.sample(range(len(lines)), k=max(1, len(lines) // 4)):
        lines[index] = re.sub(
            rb"^(    )+", lambda m: rng.choice((b"\t", b"  \t", b"\t    ")) * (len(m.group()) // 4), lines[index]
        )
    return b"".join(lines)


def crlf(rng: random.Random, data: bytes) -> bytes:
    if rng.random() < 0.5:
        return data.replace(b"\n", rng.choice((b"\r\n", b"\r")))
    lines = _lines(data)  # mixed: some lines CRLF, some lone CR
    return b"".join(line.replace(b"\n", rng.choice((b"\r\n", b"\r", b"\n"))) for line in lines)


def bom(rng: random.Random, data: bytes) -> bytes:
    return b"\xef\xbb\xbf" + data if rng.random() < 0.7 else b"\xef\xbb\xbf# -*- coding: latin-1 -*-\n" + data


def form_feeds(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    for index in rng.sample(range(len(lines)), k=max(1, len(lines) // 5)):
        lines[index] = rng.choice((b"\f", b"\f\f", b"  \f")) + lines[index]
    return b"".join(lines)


def other_encoding(rng: random.Random, data: bytes) -> bytes:
    text = data.decode("utf-8", "replace") + "\nname = 'é ü ß ж'\n# ∑ Ω\n"
    encoding = rng.choice(("latin-1", "cp1252", "koi8-r", "utf-16", "shift_jis", "utf-8"))
    cookie = rng.choice(("", f"# -*- coding: {encoding} -*-\n", "# coding: latin-1\n", "# coding: no-such-codec\n"))
    return (cookie + text).encode(encoding, "replace")


def null_bytes(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        out.insert(rng.randrange(len(out) + 1), 0)
    return bytes(out)


MUTATIONS: tuple[Mutation, ...] = (
    delete_lines,
    swap_tokens,
    random_bytes,
    deep_nesting,
    long_line,
    mixed_indentation,
    crlf,
    bom,
    form_feeds,
    other_encoding,
    null_bytes,
)


def mutated(fixture: Path, mutation: Mutation, seed: int) -> bytes:
    return mutation(random.Random(seed), fixture.read_bytes())


# --- the tests ------------------------------------------------------------------------------

# Every mutation, deterministically, on fixtures that hold findings with fixes.
DETERMINISTIC_FIXTURES = [
    FIXTURES / "tip001" / "saved_tensors.py",
    FIXTURES / "tip003" / "saved_tensors.py",
    FIXTURES / "views" / "view_then_mutate.py",
]


@pytest.mark.parametrize("fixture", DETERMINISTIC_FIXTURES, ids=lambda p: p.parent.name)
@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.__name__)
def test_mutated_fixture(tmp_path: Path, fixture: Path, mutation: Mutation) -> None:
    assert_robust(tmp_path, mutated(fixture, mutation, seed=0))


@given(
    fixture=st.sampled_from(FIXTURE_FILES),
    mutations=st.lists(st.sampled_from(MUTATIONS), min_size=1, max_size=3),
    seed=st.integers(0, 2**32),
)
def test_random_mutations_of_fixtures(
    tmp_path_factory: pytest.TempPathFactory, fixture: Path, mutations: list[Mutation], seed: int
) -> None:
    rng, data = random.Random(seed), fixture.read_bytes()
    for mutation in mutations:
        data = mutation(rng, data)
    assert_robust(tmp_path_factory.mktemp("mutation"), data)


@given(code=hypothesmith.from_grammar())
def test_generated_programs(tmp_path_factory: pytest.TempPathFactory, code: str) -> None:
    assert_robust(tmp_path_factory.mktemp("generated"), code.encode("utf-8", "surrogatepass"))


@given(code=hypothesmith.from_node())
def test_generated_syntax_trees(tmp_path_factory: pytest.TempPathFactory, code: str) -> None:
    assert_robust(tmp_path_factory.mktemp("generated"), code.encode("utf-8", "surrogatepass"))


# --- crashes found, kept as regression cases -----------------------------------------------

REGRESSIONS = [
    # LibCST's native parser overflowed the C stack (segfault) on nesting Python refuses;
    # the linter now asks Python's parser first.
    pytest.param(b"y = " + b"f(" * 3000 + b"x" + b")" * 3000 + b"\n", id="segfault-nested-calls"),
    pytest.param(b"y = " + b"[" * 3000 + b"]" * 3000 + b"\n", id="segfault-nested-lists"),
    pytest.param(b"y = " + b"lambda: " * 4000 + b"x\n", id="segfault-nested-lambdas"),
    # The analysis recursed once per link of a chain Python compiles fine (fixed).
    pytest.param(b"y = x" + b" + x" * 500 + b"\n", id="recursion-binary-chain"),
    pytest.param(b"y = x" + b".relu()" * 500 + b"\n", id="recursion-method-chain"),
    pytest.param(b"y = x" + b".a" * 500 + b"\n", id="recursion-attribute-chain"),
]


@pytest.mark.parametrize("data", REGRESSIONS)
def test_regression(tmp_path: Path, data: bytes) -> None:
    assert_robust(tmp_path, data)


FIXABLE_HAZARD = b"\nclass M(torch.nn.Module):\n    def forward(self, x):\n        h = torch.sigmoid(x)\n        h.mul_(2)\n        return h\n"


@pytest.mark.parametrize("link", [b" + x", b"[0]", b".a"], ids=["binary", "subscript", "attribute"])
def test_fix_is_built_beside_a_long_chain(tmp_path: Path, link: bytes) -> None:
    """Building a fix indexes the whole tree, which recursed once per link of a chain anywhere
    in the file: an internal error instead of the finding (found by `scripts/fuzz.py
    --examples 300`; FormRule.check now builds findings under `recursion.deep_recursion`).
    1,500 links: Python compiles them even from deep in pytest's stack (its compiler's limit
    counts the frames already in use)."""
    assert_robust(tmp_path, b"import torch\ny = x" + link * 1500 + FIXABLE_HAZARD)
    assert (tmp_path / "fuzzed.py").read_text().count("h = h.mul(2)") == 1  # found, and fixed
