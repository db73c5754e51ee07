"""Configuration: which file is read, how selection resolves (ruff's semantics), and errors."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from fakes import fake_rules  # noqa: F401 - a fixture
from support import check_file

from torchlint_inplace import config
from torchlint_inplace.config import ConfigError, Overrides, Selection, Settings, resolve, resolve_selection

pytestmark = pytest.mark.usefixtures("fake_rules")


def write_pyproject(directory: Path, body: str) -> Path:
    path = directory / "pyproject.toml"
    path.write_text(f"[tool.torchlint-inplace]\n{body}\n")
    return path


@pytest.mark.parametrize(
    ("layers", "preview", "expected"),
    [
        ([], False, ("TIP001", "TIP003")),
        ([], True, ("TIP001", "TIP003", "TIP009")),
        ([Selection(select=("TIP003",))], False, ("TIP003",)),
        ([Selection(extend_select=("TIP009",))], False, ("TIP001", "TIP003", "TIP009")),
        ([Selection(ignore=("TIP001",))], False, ("TIP003",)),
        ([Selection(select=("ALL",))], False, ("TIP001", "TIP003")),  # a prefix skips non-default rules
        ([Selection(select=("ALL",))], True, ("TIP001", "TIP003", "TIP009")),
        ([Selection(select=("TIP",), ignore=("TIP001",))], False, ("TIP003",)),
        # within one layer the more specific selector wins, whichever list it is in
        ([Selection(select=("TIP001",), ignore=("TIP",))], False, ("TIP001",)),
        ([Selection(select=("TIP0",), ignore=("TIP00",))], False, ()),
        # on equal specificity ignore wins
        ([Selection(select=("TIP001",), ignore=("TIP001",))], False, ()),
        # a later layer's select replaces, its extend-select and ignore adjust
        ([Selection(select=("TIP001",)), Selection(extend_select=("TIP003",))], False, ("TIP001", "TIP003")),
        ([Selection(select=("TIP001",)), Selection(select=("TIP003",))], False, ("TIP003",)),
        ([Selection(ignore=("TIP003",)), Selection(ignore=("TIP001",))], False, ()),
        ([Selection(select=("TIP001",)), Selection(ignore=("TIP001",))], False, ()),
    ],
)
def test_selection_semantics(layers: list[Selection], preview: bool, expected: tuple[str, ...]) -> None:
    assert resolve_selection(layers, preview) == expected


def test_nearest_pyproject_with_the_table_wins_walking_up(tmp_path: Path) -> None:
    write_pyproject(tmp_path, "select = ['TIP003']")
    nested = tmp_path / "a" / "b"
    nested.mkdir(parents=True)
    (tmp_path / "a" / "pyproject.toml").write_text("[project]\nname = 'x'\n")  # no table: skipped
    settings = resolve(Overrides(), cwd=nested)
    assert settings.select == ("TIP003",)
    assert settings.root == str(tmp_path)
    assert settings.config_path == str(tmp_path / "pyproject.toml")


def test_no_config_means_defaults_rooted_at_cwd(tmp_path: Path) -> None:
    settings = resolve(Overrides(), cwd=tmp_path)
    assert settings == Settings(root=str(tmp_path), select=("TIP001", "TIP003"))


def test_isolated_ignores_the_config_file(tmp_path: Path) -> None:
    write_pyproject(tmp_path, "select = ['TIP003']")
    assert resolve(Overrides(isolated=True), cwd=tmp_path).select == ("TIP001", "TIP003")


def test_command_line_overrides_the_file(tmp_path: Path) -> None:
    write_pyproject(tmp_path, "select = ['TIP003']\npreview = true\nexclude = ['a']\nextend-exclude = ['b']")
    overrides = Overrides(
        selection=Selection(extend_select=("TIP001",)), preview=False, exclude=("c",), extend_exclude=("d",)
    )
    settings = resolve(overrides, cwd=tmp_path)
    assert settings.select == ("TIP001", "TIP003")
    assert settings.preview is False
    assert settings.exclude == ("c",)
    assert settings.extend_exclude == ("b", "d")


def test_file_keys_are_read(tmp_path: Path) -> None:
    write_pyproject(
        tmp_path,
        "extend-select = ['TIP009']\nignore = ['TIP003']\npreview = true\n"
        "[tool.torchlint-inplace.per-file-ignores]\n'tests/*' = ['TIP0']\n'__init__.py' = ['TIP001']",
    )
    settings = resolve(Overrides(), cwd=tmp_path)
    assert settings.select == ("TIP001", "TIP009")
    assert settings.preview is True
    assert settings.per_file_ignores == (("__init__.py", ("TIP001",)), ("tests/*", ("TIP001", "TIP003", "TIP009")))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("selct = ['TIP001']", "unknown key 'selct' in [tool.torchlint-inplace] of {path}"),
        ("select = ['TIP404']", "unknown rule code or prefix 'TIP404' in 'select' of {path}"),
        ("ignore = ['E501']", "unknown rule code or prefix 'E501' in 'ignore' of {path}"),
        ("extend-select = ['tip001']", "unknown rule code or prefix 'tip001' in 'extend-select' of {path}"),
        ("select = 'TIP001'", "'select' must be a list of strings in {path}"),
        ("preview = 'yes'", "'preview' must be true or false in {path}"),
        ("per-file-ignores = ['x']", "'per-file-ignores' must be a table of glob = [codes] in {path}"),
        (
            "per-file-ignores = {'x.py' = ['TIP7']}",
            "unknown rule code or prefix 'TIP7' in 'x.py' of 'per-file-ignores' of {path}",
        ),
        ("select = [", "invalid TOML in {path}: "),
    ],
)
def test_config_errors_name_the_key_or_code_and_the_file(tmp_path: Path, body: str, message: str) -> None:
    path = write_pyproject(tmp_path, body)
    with pytest.raises(ConfigError) as error:
        resolve(Overrides(), cwd=tmp_path)
    assert str(error.value).startswith(message.format(path=path))


def test_standalone_config_has_keys_at_top_level(tmp_path: Path) -> None:
    path = tmp_path / "lint.toml"
    path.write_text("select = ['TIP001']\n")
    settings = resolve(Overrides(config=path), cwd=Path("/"))
    assert settings.select == ("TIP001",)
    assert settings.root == str(tmp_path)
    path.write_text("[tool.torchlint-inplace]\nselect = ['TIP001']\n")  # not a pyproject: `tool` is a key
    with pytest.raises(ConfigError, match="unknown key 'tool'"):
        resolve(Overrides(config=path), cwd=tmp_path)


def test_settings_are_hashable_and_serialisable(tmp_path: Path) -> None:
    write_pyproject(tmp_path, "[tool.torchlint-inplace.per-file-ignores]\n'a.py' = ['TIP001']")
    settings = resolve(Overrides(), cwd=tmp_path)
    assert hash(settings) == hash(resolve(Overrides(), cwd=tmp_path))
    assert json.loads(json.dumps(dataclasses.asdict(settings)))["per_file_ignores"] == [["a.py", ["TIP001"]]]


def test_split_codes_accepts_commas_and_repeats() -> None:
    assert config.split_codes(["TIP001, TIP003", "TIP0", ""]) == ("TIP001", "TIP003", "TIP0")


def test_per_file_ignores_apply_by_path_and_by_basename(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    sources = {
        "tests/t.py": "mutate(1)\nother(1)\n",
        "pkg/__init__.py": "mutate(1)\nother(1)\n",
        "pkg/m.py": "mutate(1)\nother(1)\n",
    }
    for name, text in sources.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    settings = Settings(
        root=str(tmp_path),
        select=("TIP001", "TIP003"),
        per_file_ignores=(("tests/*", ("TIP001", "TIP003")), ("__init__.py", ("TIP001",))),
    )
    codes = {name: [f.code for f in check_file(tmp_path / name, settings).findings] for name in sources}
    assert codes == {"tests/t.py": [], "pkg/__init__.py": ["TIP003"], "pkg/m.py": ["TIP001", "TIP003"]}


def test_per_file_ignores_never_hide_tip000(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("def f(:\n")
    settings = Settings(root=str(tmp_path), select=("TIP001",), per_file_ignores=(("*", ("TIP000", "TIP001")),))
    assert [f.code for f in check_file(tmp_path / "bad.py", settings).findings] == ["TIP000"]


def test_each_file_gets_the_nearest_configuration_above_it(tmp_path: Path) -> None:
    write_pyproject(tmp_path, "select = ['TIP003']")
    (tmp_path / "sub").mkdir()
    write_pyproject(tmp_path / "sub", "select = ['TIP001']")
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "pyproject.toml").write_text("[project]\nname = 'x'\n")  # no table: the walk goes on up
    resolver = config.Resolver(Overrides(), cwd=tmp_path / "elsewhere")
    assert resolver.for_path(tmp_path / "top.py").select == ("TIP003",)
    assert resolver.for_path(tmp_path / "sub" / "deep" / "m.py").select == ("TIP001",)
    assert resolver.for_path(tmp_path / "sub" / "m.py").root == str(tmp_path / "sub")
    assert resolver.for_path(tmp_path / "plain" / "m.py").config_path == str(tmp_path / "pyproject.toml")


def test_config_and_isolated_apply_to_every_file(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    write_pyproject(tmp_path / "sub", "select = ['TIP001']")
    named = tmp_path / "lint.toml"
    named.write_text("select = ['TIP009']\n")
    by_config = config.Resolver(Overrides(config=named), cwd=tmp_path)
    isolated = config.Resolver(Overrides(isolated=True), cwd=tmp_path)
    assert by_config.for_path(tmp_path / "sub" / "m.py").select == ("TIP009",)
    assert isolated.for_path(tmp_path / "sub" / "m.py") == Settings(root=str(tmp_path), select=("TIP001", "TIP003"))


def test_a_broken_configuration_of_a_subproject_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    write_pyproject(tmp_path / "sub", "selct = ['TIP001']")
    resolver = config.Resolver(Overrides(), cwd=tmp_path)
    assert resolver.for_path(tmp_path / "m.py").select == ("TIP001", "TIP003")
    with pytest.raises(ConfigError, match="unknown key 'selct'"):
        resolver.for_path(tmp_path / "sub" / "m.py")
