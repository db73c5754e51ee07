"""Which files a run checks: directory walking, default excludes, .gitignore, explicit files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from torchlint_inplace.config import DEFAULT_EXCLUDE, Settings
from torchlint_inplace.discovery import discover
from torchlint_inplace.gitignore import parse_line
from torchlint_inplace.globs import compile_glob, matches_path


def make(root: Path, *names: str) -> None:
    for name in names:
        path = root / name
        if name.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("x = 1\n")


def found(
    root: Path, *paths: Path | str, exclude: tuple[str, ...] = DEFAULT_EXCLUDE, extend: tuple[str, ...] = ()
) -> list[str]:
    settings = Settings(root=str(root), select=(), exclude=exclude, extend_exclude=extend)
    return [Path(path).relative_to(root).as_posix() for path in discover(paths or [root], settings)]


def test_walk_finds_py_and_pyi_in_sorted_order(tmp_path: Path) -> None:
    make(tmp_path, "b.py", "a/z.pyi", "a/y.py", "notes.txt", "setup.cfg", "a/data.json")
    assert found(tmp_path) == ["a/y.py", "a/z.pyi", "b.py"]


def test_default_excludes_and_virtualenvs_are_skipped(tmp_path: Path) -> None:
    skipped = [
        f"{name}/m.py"
        for name in (
            ".git",
            ".hg",
            ".venv",
            "venv",
            "__pycache__",
            "build",
            "dist",
            ".tox",
            ".nox",
            ".eggs",
            "node_modules",
            ".torchlint_inplace_cache",
        )
    ]
    make(
        tmp_path,
        *skipped,
        "lib/site-packages/torch/x.py",
        "pkg.egg-info/m.py",
        "env/pyvenv.cfg",
        "env/lib/m.py",
        "src/keep.py",
    )
    assert found(tmp_path) == ["src/keep.py"]


def test_exclude_replaces_defaults_and_extend_exclude_adds(tmp_path: Path) -> None:
    make(tmp_path, "build/m.py", "gen/out.py", "src/gen_x.py", "src/keep.py", "src/sub/deep.py")
    assert found(tmp_path, exclude=()) == ["build/m.py", "gen/out.py", "src/gen_x.py", "src/keep.py", "src/sub/deep.py"]
    assert found(tmp_path, extend=("gen", "gen_*.py")) == ["src/keep.py", "src/sub/deep.py"]
    assert found(tmp_path, extend=("src/sub",)) == ["gen/out.py", "src/gen_x.py", "src/keep.py"]
    assert found(tmp_path, extend=("src/*.py",)) == ["gen/out.py", "src/sub/deep.py"]
    assert found(tmp_path, extend=("src/**/*.py",)) == ["gen/out.py"]


def test_explicit_files_are_always_checked(tmp_path: Path) -> None:
    make(tmp_path, ".git/", "build/gen.py", "ignored.py", "script", "skip_me.py")
    (tmp_path / ".gitignore").write_text("ignored.py\n")
    named = [tmp_path / "build/gen.py", tmp_path / "ignored.py", tmp_path / "script", tmp_path / "skip_me.py"]
    assert found(tmp_path, *named, extend=("skip_me.py",)) == ["build/gen.py", "ignored.py", "script", "skip_me.py"]
    assert found(tmp_path, extend=("skip_me.py",)) == []


def test_named_directory_is_walked_even_if_excluded_and_duplicates_collapse(tmp_path: Path) -> None:
    make(tmp_path, "build/a.py", "build/b.py")
    assert found(tmp_path, tmp_path / "build", tmp_path / "build" / "a.py") == ["build/a.py", "build/b.py"]


def test_missing_named_path_is_kept_for_the_reader_to_report(tmp_path: Path) -> None:
    assert found(tmp_path, tmp_path / "nope.py") == ["nope.py"]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    return tmp_path


def test_gitignore_basename_patterns_apply_at_any_depth(repo: Path) -> None:
    make(repo, "gen_a.py", "pkg/gen_b.py", "pkg/keep.py", "pkg/cache/x.py")
    (repo / ".gitignore").write_text("# generated\ngen_*.py\n\ncache\n")
    assert found(repo) == ["pkg/keep.py"]


def test_gitignore_negation_reincludes(repo: Path) -> None:
    make(repo, "a.py", "b.py", "keep.py")
    (repo / ".gitignore").write_text("*.py\n!keep.py\n")
    assert found(repo) == ["keep.py"]


def test_gitignore_leading_and_middle_slash_anchor(repo: Path) -> None:
    make(repo, "top.py", "pkg/top.py", "pkg/gen/x.py", "other/pkg/gen/x.py")
    (repo / ".gitignore").write_text("/top.py\npkg/gen\n")
    assert found(repo) == ["other/pkg/gen/x.py", "pkg/top.py"]


def test_gitignore_trailing_slash_matches_directories_only(repo: Path) -> None:
    make(repo, "out/x.py", "pkg/out", "pkg/keep.py")
    (repo / "pkg" / "out").rename(repo / "pkg" / "out.py")
    (repo / "sub").mkdir()
    (repo / "sub" / "out").write_text("")
    (repo / ".gitignore").write_text("out/\nout.py/\n")
    assert found(repo) == ["pkg/keep.py", "pkg/out.py"]


def test_nested_gitignore_is_relative_to_its_directory_and_overrides_parents(repo: Path) -> None:
    make(repo, "a/local.py", "a/b/local.py", "b/local.py", "a/vendored.py", "vendored.py")
    (repo / ".gitignore").write_text("vendored.py\n")
    (repo / "a" / ".gitignore").write_text("/local.py\n!vendored.py\n")
    assert found(repo) == ["a/b/local.py", "a/vendored.py", "b/local.py"]


def test_double_star_and_character_classes(repo: Path) -> None:
    make(repo, "logs/a/b/x.py", "logs/yy.py", "logs/y.py", "m1.py", "m2.py", "mx.py", "q.py")
    (repo / ".gitignore").write_text("logs/**/x.py\nm[0-9].py\n?.py\n")
    assert found(repo) == ["logs/yy.py", "mx.py"]


def test_ignored_directory_is_pruned_and_cannot_be_reincluded_from_inside(repo: Path) -> None:
    make(repo, "gen/keep.py", "src/m.py")
    (repo / ".gitignore").write_text("gen/\n!gen/keep.py\n")
    assert found(repo) == ["src/m.py"]


def test_walking_a_subdirectory_honours_ancestor_gitignores_and_info_exclude(repo: Path) -> None:
    make(repo, "src/gen/x.py", "src/secret.py", "src/m.py", ".git/info/")
    (repo / ".gitignore").write_text("gen/\n")
    (repo / ".git" / "info" / "exclude").write_text("secret.py\n")
    assert found(repo, repo / "src") == ["src/m.py"]


def test_gitignore_outside_a_repository_is_not_honoured(tmp_path: Path) -> None:
    make(tmp_path, "a.py")
    (tmp_path / ".gitignore").write_text("*.py\n")
    assert found(tmp_path) == ["a.py"]


def test_symlink_loop_terminates_and_each_directory_is_walked_once(tmp_path: Path) -> None:
    make(tmp_path, "pkg/m.py")
    os.symlink(tmp_path / "pkg", tmp_path / "pkg" / "loop")
    os.symlink(tmp_path, tmp_path / "pkg" / "up")
    os.symlink(tmp_path / "missing", tmp_path / "dangling.py")
    assert found(tmp_path) == ["pkg/m.py"]


def test_unreadable_directory_is_skipped_not_fatal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make(tmp_path, "locked/m.py", "open/m.py")
    real_scandir = os.scandir

    def scandir(path):
        if Path(path).name == "locked":
            raise PermissionError(13, "Permission denied")
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    assert found(tmp_path) == ["open/m.py"]


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("*.py", "a.py", True),
        ("*.py", "a/b.py", False),
        ("**/*.py", "a/b/c.py", True),
        ("**/*.py", "c.py", True),
        ("a/**", "a/b/c", True),
        ("a/**/b", "a/b", True),
        ("a/**/b", "a/x/y/b", True),
        ("[!ab].py", "c.py", True),
        ("[!ab].py", "a.py", False),
        ("[a-c]x", "bx", True),
        ("x?", "x/", False),
        ("{tests,docs}/*", "docs/a", True),
        ("a\\*", "a*", True),
        ("a\\*", "ab", False),
    ],
)
def test_glob_translation(pattern: str, path: str, matches: bool) -> None:
    assert (compile_glob(pattern).match(path) is not None) is matches


def test_ruff_style_pattern_matches_name_or_root_relative_path() -> None:
    assert matches_path("__init__.py", "a/b/__init__.py", "__init__.py")
    assert matches_path("a/*.py", "a/m.py", "m.py")
    assert not matches_path("a/*.py", None, "m.py")  # outside the root
    assert matches_path("./a/m.py", "a/m.py", "m.py")


@pytest.mark.parametrize("line", ["", "# comment", "   ", "/"])
def test_gitignore_blank_and_comment_lines_are_not_patterns(line: str) -> None:
    assert parse_line(line) is None


def test_gitignore_escapes() -> None:
    literal_hash = parse_line("\\#file")
    literal_bang = parse_line("\\!important")
    assert literal_hash is not None and literal_hash.regex.match("#file") and not literal_hash.negated
    assert literal_bang is not None and literal_bang.regex.match("!important") and not literal_bang.negated


def test_a_relative_path_finds_the_same_callers_as_an_absolute_one(monkeypatch) -> None:
    """The search for a helper's callers orders them by distance; a path given relative to the
    working directory (as editors and scripts pass them) must be measured like an absolute one."""
    from torchlint_inplace import api

    folder = Path(__file__).resolve().parent.parent / "fixtures" / "tip007"
    text = (folder / "project" / "layers.py").read_text(encoding="utf-8")
    absolute = [(f.line, f.code) for f in api.lint_source(text, folder / "project" / "layers.py")]
    monkeypatch.chdir(folder)
    relative = [(f.line, f.code) for f in api.lint_source(text, "project/layers.py")]
    assert relative == absolute and absolute
