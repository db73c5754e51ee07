"""The command line as a user drives it: arguments, options, output and exit codes."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from fakes import fake_rules  # noqa: F401 - a fixture

from torchlint_inplace import __version__, analysis, api, config
from torchlint_inplace.cli import main

pytestmark = pytest.mark.usefixtures("fake_rules")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "model.py").write_text("x = 1\nmutate(x)\nother(x)\n")
    (tmp_path / "pkg" / "clean.py").write_text("x = 1\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def codes_and_lines(result: Result) -> list[tuple[str, int, str]]:
    return [(f["filename"], f["location"]["row"], f["code"]) for f in json.loads(result.stdout)["findings"]]


def test_bare_paths_and_check_subcommand_are_the_same_command(project: Path) -> None:
    bare, explicit, default = run("pkg"), run("check", "pkg"), run()
    assert bare.exit_code == explicit.exit_code == default.exit_code == 1
    assert bare.stdout == explicit.stdout == default.stdout
    assert "pkg/model.py:2:1: TIP001 `mutate` called" in bare.stdout
    assert "Found 2 errors in 1 file (2 files checked)." in bare.stdout


def test_options_before_the_path_reach_check(project: Path) -> None:
    result = run("--select", "TIP003", "--format", "json", "pkg")
    assert codes_and_lines(result) == [("pkg/model.py", 3, "TIP003")]


def test_a_path_named_like_a_subcommand_file_is_checked(project: Path) -> None:
    (project / "rule.py").write_text("mutate(1)\n")
    result = run("rule.py", "--format", "json")
    assert codes_and_lines(result) == [("rule.py", 1, "TIP001")]


def test_clean_run_exits_zero_with_summary(project: Path) -> None:
    result = run("pkg/clean.py")
    assert result.exit_code == 0
    assert result.stdout == "All checks passed!\n"


def test_exit_zero_keeps_the_findings_but_exits_zero(project: Path) -> None:
    result = run("--exit-zero", "pkg")
    assert result.exit_code == 0
    assert "TIP001" in result.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), {"TIP001", "TIP003"}),
        (("--select", "TIP001"), {"TIP001"}),
        (("--select", "TIP001,TIP003"), {"TIP001", "TIP003"}),
        (("--select", "TIP001", "--select", "TIP003"), {"TIP001", "TIP003"}),
        (("--ignore", "TIP001"), {"TIP003"}),
        (("--ignore", "TIP0"), set()),
        (("--select", "TIP001", "--extend-select", "TIP009"), {"TIP001", "TIP009"}),
        (("--select", "ALL"), {"TIP001", "TIP003"}),
        (("--preview",), {"TIP001", "TIP003", "TIP009"}),
    ],
)
def test_rule_selection_options(project: Path, args: tuple[str, ...], expected: set[str]) -> None:
    (project / "pkg" / "model.py").write_text("mutate(x)\nother(x)\npreview(x)\n")
    result = run(*args, "--format", "json", "pkg")
    assert {code for _, _, code in codes_and_lines(result)} == expected
    assert result.exit_code == (1 if expected else 0)


@pytest.mark.parametrize("option", ["--select", "--ignore", "--extend-select"])
def test_unknown_code_on_the_command_line_is_a_one_line_error(project: Path, option: str) -> None:
    result = run(option, "TIP998", "pkg")
    assert result.exit_code == 2
    assert result.stderr == f"error: unknown rule code or prefix 'TIP998' in {option}\n"
    assert result.stdout == ""


def test_unknown_config_key_exits_2_naming_key_and_file(project: Path) -> None:
    (project / "pyproject.toml").write_text("[tool.torchlint-inplace]\nselct = ['TIP001']\n")
    result = run("pkg")
    assert result.exit_code == 2
    assert "unknown key 'selct'" in result.stderr and str(project / "pyproject.toml") in result.stderr
    assert "Traceback" not in result.stderr


def test_config_file_is_used_and_flags_override_it(project: Path) -> None:
    (project / "pyproject.toml").write_text("[tool.torchlint-inplace]\nselect = ['TIP003']\n")
    assert {c for *_, c in codes_and_lines(run("--format", "json", "pkg"))} == {"TIP003"}
    assert {c for *_, c in codes_and_lines(run("--format", "json", "--select", "TIP001", "pkg"))} == {"TIP001"}
    assert {c for *_, c in codes_and_lines(run("--format", "json", "--isolated", "pkg"))} == {"TIP001", "TIP003"}


def test_config_option_reads_a_standalone_toml_and_a_pyproject(project: Path, tmp_path_factory) -> None:
    elsewhere = tmp_path_factory.mktemp("configs")
    (elsewhere / "lint.toml").write_text("ignore = ['TIP001']\n")
    (elsewhere / "pyproject.toml").write_text("[tool.torchlint-inplace]\nignore = ['TIP003']\n")
    standalone = run("--config", str(elsewhere / "lint.toml"), "--format", "json", "pkg")
    pyproject = run("--config", str(elsewhere / "pyproject.toml"), "--format", "json", "pkg")
    assert {c for *_, c in codes_and_lines(standalone)} == {"TIP003"}
    assert {c for *_, c in codes_and_lines(pyproject)} == {"TIP001"}


def test_missing_config_file_is_a_usage_error(project: Path) -> None:
    result = run("--config", "nope.toml", "pkg")
    assert result.exit_code == 2


@pytest.mark.parametrize(
    ("args", "checked"),
    [
        ((), {"pkg/model.py", "pkg/clean.py", "gen/made.py"}),
        (("--extend-exclude", "gen"), {"pkg/model.py", "pkg/clean.py"}),
        (("--exclude", "model.py,gen"), {"pkg/clean.py"}),
        (("--extend-exclude", "pkg/*.py"), {"gen/made.py"}),
    ],
)
def test_exclude_options(project: Path, args: tuple[str, ...], checked: set[str]) -> None:
    (project / "gen").mkdir()
    (project / "gen" / "made.py").write_text("def f(:\n")
    result = run(*args, "--format", "json", ".")
    assert json.loads(result.stdout)["files_checked"] == len(checked)
    reported = {name for name, _, _ in codes_and_lines(result)}
    assert reported == {"pkg/model.py", "gen/made.py"} & checked


def test_formats(project: Path) -> None:
    concise = run("--format", "concise", "pkg")
    assert concise.stdout.splitlines() == [
        "pkg/model.py:2:1: TIP001 `mutate` called",
        "pkg/model.py:3:1: TIP003 `other` called",
        "Found 2 errors in 1 file (2 files checked).",
    ]
    github = run("--format", "github", "pkg")
    assert github.stdout.startswith("::error file=pkg/model.py,line=2,col=1")
    sarif = json.loads(run("--format", "sarif", "pkg").stdout)
    assert sarif["version"] == "2.1.0" and len(sarif["runs"][0]["results"]) == 2
    assert concise.exit_code == github.exit_code == 1


def test_output_file_receives_the_report_and_stdout_stays_empty(project: Path) -> None:
    target = project / "reports" / "out.json"
    result = run("--format", "json", "--output-file", str(target), "pkg")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert len(json.loads(target.read_text())["findings"]) == 2


def test_statistics_counts_per_code_with_fixability_and_a_total(project: Path) -> None:
    """`[*]` every finding of the code has a safe fix, `[~]` some do, `[ ]` none, as ruff marks them."""
    (project / "pkg" / "model.py").write_text("mutate(1)  # fix: safe\nmutate(2)\nother(1)  # fix: safe\n")
    (project / "pkg" / "clean.py").write_text("other(2)  # fix: safe\npreview(1)  # fix: unsafe\n")
    text = run("--statistics", "--preview", "pkg")
    assert text.stdout == (
        "2\tTIP001\t[~] fake-mutate\n"
        "2\tTIP003\t[*] fake-other\n"
        "1\tTIP009\t[ ] fake-preview\n"
        "Found 5 errors. [*] 3 fixable with --fix (1 more with --unsafe-fixes).\n"
    )
    assert text.exit_code == 1
    assert run("--statistics", "--quiet", "pkg").stdout.splitlines()[-1] == "2\tTIP003\t[*] fake-other"
    data = json.loads(run("--statistics", "--preview", "--format", "json", "pkg").stdout)
    assert data == [
        {
            "code": "TIP001",
            "name": "fake-mutate",
            "count": 2,
            "fixable": True,
            "fixable_count": 1,
            "unsafe_fixable_count": 0,
        },
        {
            "code": "TIP003",
            "name": "fake-other",
            "count": 2,
            "fixable": True,
            "fixable_count": 2,
            "unsafe_fixable_count": 0,
        },
        {
            "code": "TIP009",
            "name": "fake-preview",
            "count": 1,
            "fixable": False,
            "fixable_count": 0,
            "unsafe_fixable_count": 1,
        },
    ]


@pytest.mark.parametrize(
    ("lines", "summary"),
    [
        (
            "mutate(1)  # fix: safe\nmutate(2)  # fix: unsafe\nmutate(3)\n",
            "Found 3 errors. [*] 1 fixable with --fix (1 more with --unsafe-fixes).",
        ),
        ("mutate(1)  # fix: safe\nmutate(2)\n", "Found 2 errors. [*] 1 fixable with --fix."),
        ("mutate(1)  # fix: unsafe\n", "Found 1 error. 1 fixable with --unsafe-fixes."),
        ("mutate(1)\n", "Found 1 error."),
    ],
)
def test_summary_says_what_fixes_can_do(project: Path, lines: str, summary: str) -> None:
    (project / "one.py").write_text(lines)
    for format in ("full", "concise"):
        assert run("--format", format, "one.py").stdout.splitlines()[-1] == summary


def test_quiet_prints_findings_without_summary(project: Path) -> None:
    quiet = run("--quiet", "--format", "concise", "pkg")
    assert quiet.stdout.splitlines() == [
        "pkg/model.py:2:1: TIP001 `mutate` called",
        "pkg/model.py:3:1: TIP003 `other` called",
    ]
    full = run("-q", "pkg")
    assert "TIP003" in full.stdout and "Found" not in full.stdout
    assert run("-q", "pkg/clean.py").stdout == ""


def test_missing_path_is_reported_like_ruffs_io_error(project: Path) -> None:
    result = run("--format", "concise", "nope.py", "pkg/clean.py")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == "nope.py:1:1: TIP000 no such file or directory"


def test_crash_in_one_file_is_a_finding_and_other_files_are_checked(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = analysis.analyze

    def explode(module, path, project=None, preview=False):
        if path.endswith("clean.py"):
            raise KeyError("boom")
        return real(module, path, project, preview)

    monkeypatch.setattr(analysis, "analyze", explode)
    quiet = run("--format", "concise", "pkg")
    assert quiet.exit_code == 1
    assert "pkg/clean.py:1:1: TIP000 internal error while checking this file" in quiet.stdout
    assert "KeyError: 'boom'" in quiet.stdout and "TIP001" in quiet.stdout
    assert "Traceback" not in quiet.stderr
    verbose = run("--format", "concise", "--verbose", "pkg")
    assert "Traceback (most recent call last)" in verbose.stderr and "explode" in verbose.stderr


def test_internal_error_outside_files_exits_2_without_traceback(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args, **options):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(api, "lint_paths", broken)
    result = run("pkg")
    assert result.exit_code == 2
    assert result.stderr == "error: internal error: RuntimeError: disk on fire (run with --verbose for the traceback)\n"
    verbose = run("--verbose", "pkg")
    assert verbose.exit_code == 2 and "Traceback (most recent call last)" in verbose.stderr


def test_findings_are_sorted_by_path_line_column(project: Path) -> None:
    (project / "a.py").write_text("other(1); mutate(2)\nmutate(3)\n")
    result = run("--format", "json", ".")
    findings = json.loads(result.stdout)["findings"]
    keys = [(f["filename"], f["location"]["row"], f["location"]["column"]) for f in findings]
    assert keys == sorted(keys) and keys[0] == ("a.py", 1, 1) and keys[1] == ("a.py", 1, 11)


def test_rule_prints_documentation(project: Path) -> None:
    result = run("rule", "TIP001")
    assert result.exit_code == 0
    assert result.stdout.startswith("# fake-mutate (TIP001)\n\ncalls the trigger\n")
    assert "## Example\n\n```python\nmutate(x)\n```" in result.stdout
    assert "## Use instead\n\n```python\nkeep(x)\n```" in result.stdout
    every = run("rule", "--all")
    assert [line for line in every.stdout.splitlines() if line.startswith("# ")] == [
        "# file-not-checked (TIP000)",
        "# fake-mutate (TIP001)",
        "# fake-other (TIP003)",
        "# fake-preview (TIP009)",
    ]
    assert "--preview" in every.stdout  # the preview rule says how to enable it
    assert run("rule", "TIP000").stdout.startswith("# file-not-checked (TIP000)")


def test_rule_accepts_names_as_well_as_codes(project: Path) -> None:
    assert run("rule", "fake-other").stdout == run("rule", "TIP003").stdout
    assert run("rule", "tip003").stdout.startswith("# fake-other (TIP003)")
    assert run("rule", "file-not-checked").stdout == run("rule", "TIP000").stdout


def test_rule_errors(project: Path) -> None:
    unknown = run("rule", "TIP404")
    assert unknown.exit_code == 2 and unknown.stderr.startswith("error: unknown rule code or name 'TIP404'")
    assert run("rule").exit_code == 2
    assert run("rule", "TIP001", "--all").exit_code == 2


def test_version() -> None:
    result = run("--version")
    assert result.stdout == f"torchlint-inplace {__version__}\n"


def test_python_dash_m_runs_the_same_command(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("def f(:\n")
    result = subprocess.run(
        [sys.executable, "-m", "torchlint_inplace", "--format", "concise", "--isolated", "broken.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert result.stdout.startswith("broken.py:1:7: TIP000 syntax error: invalid syntax")


def test_a_reader_that_stops_early_is_not_an_error() -> None:
    """`torchlint-inplace src/ | head -1`: the closed pipe ends the output, not with a traceback
    or an internal error, and the exit status still says there were findings."""
    fixtures = Path(__file__).resolve().parent.parent / "fixtures"
    command = f"{shlex.quote(sys.executable)} -m torchlint_inplace --isolated --no-cache {shlex.quote(str(fixtures))} | head -c 1; exit ${{PIPESTATUS[0]}}"
    result = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=600)
    assert result.returncode == 1, result.stderr
    assert "error" not in result.stderr.lower(), result.stderr


@pytest.mark.parametrize(("typed", "meant"), [("rulez", "rule"), ("chek", "check"), ("traec", "trace")])
def test_a_mistyped_subcommand_is_a_usage_error_with_a_suggestion(project: Path, typed: str, meant: str) -> None:
    result = run(typed, "x.py")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == f"error: no such command or path {typed!r}; did you mean {meant!r}?\n"


def test_a_path_named_like_a_mistyped_subcommand_is_checked(project: Path) -> None:
    (project / "rulez").mkdir()
    (project / "rulez" / "m.py").write_text("mutate(1)\n")
    result = run("rulez", "--format", "concise")
    assert result.exit_code == 1 and result.stdout.startswith("rulez/m.py:1:1: TIP001")


def test_an_argument_unlike_any_subcommand_is_a_missing_path(project: Path) -> None:
    assert run("--format", "concise", "src").stdout.startswith("src:1:1: TIP000 no such file or directory")


def test_usage_errors_are_one_line(project: Path) -> None:
    for args in (("--no-such-option",), ("--format", "xml"), ("--jobs", "0"), ("rule",), ("--fix", "--add-noqa")):
        result = run(*args)
        assert result.exit_code == 2, args
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: "), (args, result.stderr)


def test_a_walk_that_finds_no_files_warns(project: Path) -> None:
    (project / "empty").mkdir()
    (project / "empty" / "notes.txt").write_text("no python here\n")
    result = run("empty")
    assert result.exit_code == 0 and result.stdout == "All checks passed!\n"
    assert result.stderr == "warning: No Python files found under the given path(s)\n"
    assert run("pkg").stderr == ""


def test_ctrl_c_exits_130_with_one_line(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(api, "lint_paths", interrupted)
    result = run("pkg")
    assert result.exit_code == 130 and result.stderr == "Interrupted.\n" and result.stdout == ""


def test_top_level_help_says_check_is_the_default_with_examples() -> None:
    help_text = run("--help").stdout
    assert "Without a command, `check` runs" in help_text
    assert "  torchlint-inplace src/ train.py      check these paths\n" in help_text
    assert "  torchlint-inplace rule TIP002        explain a rule\n" in help_text


@pytest.mark.parametrize(
    ("args", "environment", "coloured"),
    [
        ((), {}, False),  # not a terminal
        (("--color", "always"), {}, True),
        (("--color", "always"), {"NO_COLOR": "1"}, True),  # the option wins over the environment
        (("--color", "never"), {"FORCE_COLOR": "1"}, False),
        ((), {"FORCE_COLOR": "1"}, True),
        ((), {"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
        ((), {"FORCE_COLOR": ""}, False),  # set but empty means unset
    ],
)
def test_color_option_and_environment(
    project: Path, monkeypatch: pytest.MonkeyPatch, args, environment, coloured: bool
) -> None:
    for name in ("NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    result = run(*args, "pkg")
    assert ("\x1b[" in result.stdout) is coloured
    assert "`mutate` called" in result.stdout


def test_color_never_reaches_an_output_file_unless_always(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    run("--color", "never", "-o", "plain.txt", "pkg")
    run("--color", "always", "-o", "painted.txt", "pkg")
    assert "\x1b[" not in (project / "plain.txt").read_text() and "\x1b[" in (project / "painted.txt").read_text()


def test_a_subprojects_configuration_applies_when_run_from_its_parent(project: Path) -> None:
    """`torchlint-inplace proj` from the parent honours proj/pyproject.toml (its selection and
    its excludes, relative to it), and a file outside keeps the defaults."""
    (project / "proj" / "gen").mkdir(parents=True)
    (project / "proj" / "pyproject.toml").write_text(
        "[tool.torchlint-inplace]\nselect = ['TIP003']\nextend-exclude = ['gen/*.py']\n"
    )
    (project / "proj" / "m.py").write_text("mutate(1)\nother(1)\n")
    (project / "proj" / "gen" / "made.py").write_text("other(2)\n")
    (project / "loose.py").write_text("mutate(1)\nother(1)\n")
    result = run("--format", "json", "proj", "loose.py")
    assert codes_and_lines(result) == [("loose.py", 1, "TIP001"), ("loose.py", 2, "TIP003"), ("proj/m.py", 2, "TIP003")]


def test_show_files_lists_what_would_be_checked(project: Path) -> None:
    (project / "pkg" / "notes.txt").write_text("")
    result = run("--show-files", "pkg", "--extend-exclude", "clean.py")
    assert result.exit_code == 0 and result.stdout == "pkg/model.py\n"


def test_show_settings_prints_the_settings_of_one_file_and_their_origin(project: Path) -> None:
    (project / "proj").mkdir()
    (project / "proj" / "pyproject.toml").write_text(
        "[tool.torchlint-inplace]\nselect = ['TIP003']\n[tool.torchlint-inplace.per-file-ignores]\n'x.py' = ['TIP003']\n"
    )
    shown = run("--show-settings", "proj/new.py")  # the file need not exist
    assert shown.exit_code == 0
    assert shown.stdout.splitlines() == [
        "# Settings for proj/new.py",
        f"# from {project / 'proj' / 'pyproject.toml'}",
        f'root = "{project / "proj"}"',
        'select = ["TIP003"]',
        "preview = false",
        f"exclude = {json.dumps(list(config.DEFAULT_EXCLUDE))}",
        "extend-exclude = []",
        f"include = {json.dumps(list(config.DEFAULT_INCLUDE))}",
        "extend-include = []",
        'per-file-ignores = {"x.py" = ["TIP003"]}',
    ]
    overridden = run("--show-settings", "--extend-select", "TIP001", "proj/new.py").stdout.splitlines()
    assert (
        overridden[1].endswith(", with the command line's options on top")
        and overridden[3] == 'select = ["TIP001", "TIP003"]'
    )
    assert run("--show-settings", "--isolated", "proj").stdout.splitlines()[1] == "# from the defaults (--isolated)"
    assert (
        run("--show-settings", "pkg/model.py")
        .stdout.splitlines()[1]
        .startswith("# from the defaults (no pyproject.toml")
    )
    assert run("--show-settings", "a.py", "b.py").exit_code == 2
