"""`reparse` must build exactly the tree `libcst.parse_module` builds for the new text, or
give up (None): compared node for node (`deep_equals`) over every fixture, under random
edits of the kinds typing makes, one after another as an editor sends them; and the
positions derived from the previous version's must be those a codegen of the new tree gives."""

from __future__ import annotations

import random
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, ParentNodeProvider

from torchlint_inplace.analysis.positions import MAX_DERIVED, Positions, positions_of
from torchlint_inplace.analysis.reparse import Parsed, Pieces, reparse

FIXTURES = sorted((Path(__file__).resolve().parent.parent / "fixtures").rglob("*.py"))
# Lines an edit inserts: code, comments at each indentation, blank lines, clauses, a decorator.
INSERTED = [
    "x = 1\n", "    y = 2\n", "        z = (3,\n", ")\n", "# a comment\n", "    # an indented comment\n",
    "\n", "    \n", "else:\n", "@decorator\n", "def added(a):\n", "class Added:\n", "  two = 2\n",
    "\tt = 1\n", '"""doc\n', "import os\n",
]  # fmt: skip


def edited(text: str, rng: random.Random) -> str:
    lines = text.splitlines(keepends=True)
    where = rng.randrange(len(lines) + 1)
    kind = rng.randrange(5)
    if kind == 0 or not lines:
        lines[where:where] = [rng.choice(INSERTED)]
    elif kind == 1:
        del lines[min(where, len(lines) - 1)]
    elif kind == 2:  # a character typed into a line
        at = min(where, len(lines) - 1)
        line = lines[at]
        column = rng.randrange(len(line))
        lines[at] = line[:column] + rng.choice(["a", " ", "(", ":", "#", "1"]) + line[column:]
    elif kind == 3:  # a line typed again below itself
        at = min(where, len(lines) - 1)
        lines.insert(at, lines[at])
    else:  # a block of lines removed
        del lines[where : where + rng.randrange(1, 8)]
    return "".join(lines)


def full(text: str) -> cst.Module | None:
    try:
        return cst.parse_module(text)
    except (cst.ParserSyntaxError, RecursionError):
        return None


def check(old: Parsed, text: str) -> Parsed:
    """The version after `old`: the reparsed one where reparse managed, checked against the
    whole parse (and its positions, derived from the old version's, against a codegen of
    its own), else the whole parse (what the caller falls back to)."""
    expected = full(text)
    positions_of(old.module)  # the editor's last version was reported on
    got = reparse(old, text)
    if expected is None:
        assert got is None, "a text the parser refuses was built from pieces"
        return old
    if got is None:
        return Parsed(text, expected)
    assert got.module.deep_equals(expected), text
    assert got.module.code == text
    assert got.pieces == Pieces.of(expected)
    derived, fresh = positions_of(got.module), Positions(got.module)
    parents = MetadataWrapper(got.module, unsafe_skip_copy=True).resolve(ParentNodeProvider)
    for node in [got.module, *parents]:
        assert derived[node] == fresh[node], (type(node).__name__, got.module.code_for_node(node)[:60])
        assert derived.parents.get(node) is fresh.parents.get(node)
    return got


@pytest.mark.slow  # every fixture, six edits each
@pytest.mark.parametrize("path", FIXTURES, ids=lambda path: str(path.relative_to(path.parents[1])))
def test_edit_after_edit_gives_the_parsers_tree(path: Path) -> None:
    rng = random.Random(str(path.name))
    text = path.read_text(encoding="utf-8")
    if full(text) is None:
        pytest.skip("the fixture does not parse")
    version = Parsed(text, cst.parse_module(text))
    for _ in range(6):
        version = check(version, edited(version.text, rng))


def test_most_edits_of_a_model_file_reuse_the_tree() -> None:
    """Not only correct but of use: typing inside one method keeps the other statements."""
    text = (Path(__file__).resolve().parent.parent / "fixtures" / "tip002" / "saved_tensors.py").read_text()
    old = Parsed(text, cst.parse_module(text))
    lines = text.splitlines(keepends=True)
    body = next(number for number, line in enumerate(lines) if line.startswith("        ") and line.strip())
    new = "".join([*lines[:body], lines[body].rstrip("\n") + "  # typed\n", *lines[body + 1 :]])
    got = check(old, new)
    assert got is not old and got.module is not old.module
    reused = {id(statement) for statement in old.module.body} & {id(statement) for statement in got.module.body}
    assert len(reused) == len(old.module.body) - 1


AWKWARD = {
    "a comment between statements": ("import a\n\n\nclass A:\n    x = 1\n", "import a\n\n# c\n\nclass A:\n    x = 1\n"),
    "an indented comment after a block": ("class A:\n    x = 1\n\ny = 2\n", "class A:\n    x = 1\n    # c\n\ny = 2\n"),
    "a block continued": ("if a:\n    x = 1\ny = 2\n", "if a:\n    x = 1\nelse:\n    x = 2\ny = 2\n"),
    "a new first indentation": ("x = 1\ny = 2\ndef f():\n    pass\n", "x = 1\nif x:\n  y = 2\ndef f():\n    pass\n"),
    "the first statement removed": ("# c\n\nimport a\n\nimport b\nx = 1\n", "# c\n\n\nimport b\nx = 1\n"),
    "comments after the last statement": ("x = 1\ny = 2\n", "x = 1\ny = 2\n# c\n"),
    "crlf": ("x = 1\r\ny = 2\r\nz = 3\r\n", "x = 1\r\ny = 5\r\nz = 3\r\n"),
    "an unclosed string": ("x = 1\ny = 2\nz = 3\n", 'x = 1\ny = """\nz = 3\n'),
    "no trailing newline": ("x = 1\ny = 2", "x = 1\ny = 3"),
}


@pytest.mark.parametrize(("old", "new"), AWKWARD.values(), ids=AWKWARD.keys())
def test_awkward_edits(old: str, new: str) -> None:
    check(Parsed(old, cst.parse_module(old)), new)


def test_a_long_run_of_versions_starts_its_positions_afresh() -> None:
    version = Parsed("import a\n\n\nclass A:\n    x = 1\n", cst.parse_module("import a\n\n\nclass A:\n    x = 1\n"))
    for number in range(MAX_DERIVED + 3):
        version = check(version, version.text + f"y{number} = {number}\n")
    assert positions_of(version.module)._depth <= MAX_DERIVED
