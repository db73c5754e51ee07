"""The `torchlint-inplace` command, shaped like ruff's so CI scripts and habits carry over.

`torchlint-inplace [OPTIONS] [PATHS]...` and `torchlint-inplace check ...` are the same
command; `rule CODE|NAME` / `rule --all` prints documentation. `check` parses its options,
makes one call into `api`, and reports. Exit codes: 0 nothing found, 1 findings, 2 usage,
configuration or internal error (one `error: ...` line on stderr; the traceback only with
--verbose), 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import difflib
import io
import json
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

import click

from . import __version__, api, config, registry, ruledoc, terminal
from .diagnostics import NOT_CHECKED_CODE, NOT_CHECKED_NAME, Finding, RunWarning
from .fixes.run import applied_summary, unified_diff
from .parallel import default_jobs
from .reporters import REPORTERS, Report, write_report
from .reporters import settings as settings_report
from .reporters.statistics import write as write_statistics
from .reporters.text import fixable, plural

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130

# Formats whose reporter ends with the closing summary line, which --quiet leaves out; the
# progress indicator shows only for them (machine formats are read by machines).
SUMMARISED_FORMATS = ("full", "concise")

INTERRUPTED = "Interrupted."


class Command(click.Group):
    """The group: its first argument, unless it names a subcommand or a group option, starts
    `check` (`torchlint-inplace src/`, `torchlint-inplace --select TIP001 .`, a path named like
    `rule.py`). An argument that is no path but looks like a mistyped subcommand (`rulez`) is
    a usage error with a suggestion. Errors are one line on stderr, as every other error."""

    GROUP_OPTIONS = ("--help", "-h", "--version")

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in self.GROUP_OPTIONS):
            if args:
                _refuse_mistyped_command(args[0], sorted(self.commands))
            args = ["check", *args]
        return super().parse_args(ctx, args)

    def main(self, *args: Any, **kwargs: Any) -> NoReturn:
        kwargs["standalone_mode"] = False
        try:
            status = super().main(*args, **kwargs)
        except click.ClickException as error:
            click.echo(f"error: {error.format_message()}", err=True)
            sys.exit(error.exit_code)
        except (click.Abort, KeyboardInterrupt):  # Ctrl-C outside `check`, which answers its own
            _interrupted()
        sys.exit(status if isinstance(status, int) else EXIT_CLEAN)


def _refuse_mistyped_command(argument: str, commands: Sequence[str]) -> None:
    if argument.startswith("-") or os.path.lexists(argument):
        return
    close = difflib.get_close_matches(argument, commands, n=1, cutoff=0.6)
    if close:
        raise click.UsageError(f"no such command or path {argument!r}; did you mean {close[0]!r}?")


def fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_ERROR)


def _interrupted() -> NoReturn:
    # On a terminal the line follows the `^C` the terminal echoed.
    click.echo(("\n" if sys.stderr.isatty() else "") + INTERRUPTED, err=True)
    sys.exit(EXIT_INTERRUPTED)


HELP = """Find the in-place tensor operations that break autograd, before anything runs.

Without a command, `check` runs: the arguments are its paths and options
(`torchlint-inplace check --help` lists them).

\b
Examples:
  torchlint-inplace src/ train.py      check these paths
  torchlint-inplace rule TIP002        explain a rule
"""


@click.group(cls=Command, help=HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="torchlint-inplace", message="%(prog)s %(version)s")
def main() -> None:
    pass


def _codes_option(name: str, help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option(name, multiple=True, metavar="CODES", help=help)


@main.command()
@click.argument(
    "paths", nargs=-1, type=click.Path(path_type=Path, readable=False)
)  # unreadable: TIP000, not a usage error
@_codes_option(
    "--select", "Rule codes or prefixes to enable (comma-separated), replacing the defaults. ALL enables every rule."
)
@_codes_option("--extend-select", "Rule codes or prefixes to enable in addition to the selection.")
@_codes_option("--ignore", "Rule codes or prefixes to disable.")
@click.option(
    "--format",
    "--output-format",
    "format_",
    type=click.Choice(list(REPORTERS)),
    default="full",
    show_default=True,
    help="Output format.",
)
@click.option(
    "--output-file",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the report to this file instead of stdout.",
)
@click.option("--exit-zero", is_flag=True, help="Exit with 0 even when there are findings.")
@click.option(
    "--statistics",
    is_flag=True,
    help="Show the number of findings per rule, and how many are fixable, instead of the findings.",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Use this pyproject.toml, or a .toml file with the same keys at top level, for every file.",
)
@click.option("--isolated", is_flag=True, help="Ignore all configuration files.")
@click.option(
    "--exclude",
    multiple=True,
    metavar="GLOBS",
    help="Globs to exclude from directory walks, replacing the default list (comma-separated).",
)
@click.option(
    "--extend-exclude",
    multiple=True,
    metavar="GLOBS",
    help="Globs to exclude in addition to the configured ones (comma-separated).",
)
@click.option(
    "--preview/--no-preview",
    default=None,
    help="Also run rules and report findings that are not enabled by default yet.",
)
@click.option("--quiet", "-q", is_flag=True, help="Print only the findings, no summary.")
@click.option("--verbose", "-v", is_flag=True, help="Show the configuration used and tracebacks of internal errors.")
@click.option(
    "--color",
    type=click.Choice(["auto", "always", "never"]),
    default="auto",
    show_default=True,
    help="Colour the report: auto colours a terminal unless NO_COLOR is set (or FORCE_COLOR asks for it).",
)
@click.option("--fix", is_flag=True, help="Apply the safe fixes and report what remains.")
@click.option(
    "--unsafe-fixes",
    is_flag=True,
    help="With --fix or --diff, also apply the fixes that may change what other code observes.",
)
@click.option(
    "--diff",
    is_flag=True,
    help="Print the fixes as a unified diff instead of writing them; exit 1 if a file would change.",
)
@click.option("--show-fixes", is_flag=True, help="With --fix, list the fixes applied (on stderr).")
@click.option(
    "--add-noqa", is_flag=True, help="Add `# noqa: CODE` to every line with a finding, instead of reporting them."
)
@click.option(
    "--show-settings",
    is_flag=True,
    help="Print the settings used for the one path given, and where they come from, instead of checking.",
)
@click.option("--show-files", is_flag=True, help="List the files that would be checked, instead of checking them.")
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    default=None,
    help="Check files in this many processes (default: all cores).",
)
@click.option("--no-cache", is_flag=True, help="Analyse every file afresh: neither read nor write the results cache.")
@click.option(
    "--stdin-filename",
    type=click.Path(path_type=Path),
    help="With `-` as the path (or no path): check standard input as if it were this file, its settings and "
    "per-file-ignores included; with --fix, print the fixed source on stdout and the report on stderr.",
)
@click.option(
    "--confirm",
    is_flag=True,
    help="Run the code around each finding (this executes the checked project's code, in a subprocess with a timeout and a memory limit; needs torch) and mark it confirmed, benign, not reached or not run.",
)
@click.option(
    "--device",
    "devices",
    default="cpu",
    show_default=True,
    metavar="cpu,cuda|auto",
    callback=lambda ctx, param, value: _devices(value),
    help="Where --confirm runs the code; auto: cuda when available, else cpu.",
)
@click.option(
    "--confirm-timeout",
    type=click.FloatRange(min=1),
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="How long --confirm lets one file run on one device.",
)
def check(
    paths: Sequence[Path],
    select: Sequence[str],
    extend_select: Sequence[str],
    ignore: Sequence[str],
    format_: str,
    output_file: Path | None,
    exit_zero: bool,
    statistics: bool,
    config_path: Path | None,
    isolated: bool,
    exclude: Sequence[str],
    extend_exclude: Sequence[str],
    preview: bool | None,
    quiet: bool,
    verbose: bool,
    color: str,
    fix: bool,
    unsafe_fixes: bool,
    diff: bool,
    show_fixes: bool,
    add_noqa: bool,
    show_settings: bool,
    show_files: bool,
    jobs: int | None,
    no_cache: bool,
    stdin_filename: Path | None,
    confirm: bool,
    devices: tuple[str, ...],
    confirm_timeout: float,
) -> None:
    """Check PATHS (default: the current directory) for hazardous in-place operations."""
    if add_noqa and (fix or diff):
        raise click.UsageError("--add-noqa cannot be combined with --fix or --diff")
    if show_settings and len(paths) != 1:
        raise click.UsageError("--show-settings takes exactly one path")
    overrides = config.Overrides(
        selection=config.Selection(
            select=config.split_codes(select) if select else None,
            extend_select=config.split_codes(extend_select),
            ignore=config.split_codes(ignore),
        ),
        exclude=config.split_codes(exclude) if exclude else None,
        extend_exclude=config.split_codes(extend_exclude),
        preview=preview,
        config=config_path,
        isolated=isolated,
    )
    stdin = list(map(str, paths)) == ["-"] or (stdin_filename is not None and not paths)
    if not stdin and "-" in map(str, paths):
        raise click.UsageError("`-` (standard input) cannot be combined with other paths")
    if stdin and (add_noqa or show_files or show_settings or confirm):
        raise click.UsageError(
            "standard input cannot be used with --add-noqa, --show-files, --show-settings or --confirm"
        )
    targets = list(paths) or [Path(".")]
    processes, use_cache = jobs or default_jobs(), not no_cache
    findings: list[Finding] = []
    try:
        resolver = config.Resolver(overrides)
        if show_settings:
            click.echo(settings_report.describe(targets[0], _display(str(targets[0])), resolver), nl=False)
            sys.exit(EXIT_CLEAN)
        if show_files:
            _show_files(targets, resolver)
            sys.exit(EXIT_CLEAN)
        if add_noqa:
            _add_noqa(api.add_noqa(targets, resolver, processes, use_cache))
            sys.exit(EXIT_CLEAN)
        if verbose:
            _show_configurations(targets, resolver)
        mode = api.FixMode.DIFF if diff else api.FixMode.WRITE if fix else api.FixMode.NONE
        if stdin:
            data = sys.stdin.buffer.read()
            name = stdin_filename or Path("-")
            run = api.lint_stdin(data, name, resolver, fix=mode, unsafe_fixes=unsafe_fixes)
            if mode is api.FixMode.WRITE:  # the fixed source is the output; the report goes to stderr
                sys.stdout.buffer.write(run.fixes[0].encoded() if run.fixes else data)
                sys.stdout.flush()
        else:
            progress = terminal.progress(sys.stderr, format_ in SUMMARISED_FORMATS and not quiet)
            try:
                run = api.lint_paths(
                    targets, resolver, processes, use_cache, fix=mode, unsafe_fixes=unsafe_fixes, progress=progress
                )
            finally:
                if progress is not None:
                    progress.close()
        display = _display
        for warning in run.warnings:
            _warn(warning)
        if verbose:
            for result in run.files:
                if result.traceback:
                    click.echo(f"internal error in {result.path}:\n{result.traceback}", err=True)
        if diff:
            _show_diff(run, unsafe_fixes)
        if show_fixes and run.fixes:
            click.echo(applied_summary(run.fixes, display), err=True, nl=False)
        findings = run.findings
        if confirm:
            findings = _confirm(findings, resolver, devices, confirm_timeout, quiet)
        report = Report(
            findings=findings,
            files_checked=len(run.files),
            root=Path.cwd(),
            sources={result.path: result.text for result in run.files if result.findings and result.text is not None},
            fixed=run.fixed,
        )
        _write(report, format_, output_file, statistics, quiet, color, sys.stderr if stdin and fix else sys.stdout)
    except config.ConfigError as error:
        fail(str(error))
    except KeyboardInterrupt:
        _interrupted()
    except BrokenPipeError:  # the reader stopped early (`| head`): what it read stands, the status too
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except Exception as error:  # a bug of ours: one line, the traceback only on request
        if verbose:
            traceback.print_exc()
        fail(
            f"internal error: {type(error).__name__}: {error}"
            + ("" if verbose else " (run with --verbose for the traceback)")
        )
    sys.exit(EXIT_CLEAN if exit_zero or not findings else EXIT_FINDINGS)


def _display(path: str) -> str:
    return Report([], 0, Path.cwd()).display_path(path)


def _warn(warning: RunWarning) -> None:
    where = (
        ""
        if warning.path is None
        else _display(warning.path) + ("" if warning.line is None else f":{warning.line}") + ": "
    )
    click.echo(f"warning: {where}{warning.message}", err=True)


def _devices(value: str) -> tuple[str, ...]:
    devices = tuple(dict.fromkeys(device.strip() for device in value.split(",") if device.strip()))
    if devices == ("auto",) or (devices and set(devices) <= {"cpu", "cuda"}):
        return devices
    raise click.BadParameter("give cpu, cuda, cpu,cuda or auto")


# ----------------------------------------------------------------------------- modes other than reporting


def _show_files(paths: Sequence[Path], resolver: config.Resolver) -> None:
    from .discovery import discover

    for path in discover(paths, resolver):
        click.echo(_display(str(path)))


def _show_configurations(paths: Sequence[Path], resolver: config.Resolver) -> None:
    """--verbose: each configuration the run uses, and its rules."""
    from .discovery import discover

    used = {resolver.for_path(path) for path in discover(paths, resolver)} or {resolver.for_directory(resolver.cwd)}
    for settings in sorted(used, key=lambda settings: settings.config_path or ""):
        where = settings.config_path or "defaults (no config file)"
        click.echo(f"configuration: {where}; rules: {', '.join(settings.select) or 'none'}", err=True)


def _add_noqa(result: api.NoqaResult) -> None:
    for warning in result.warnings:
        _warn(warning)
    count = result.added
    click.echo(f"Added {count} noqa directive{'s' if count != 1 else ''}.", err=True)


def _show_diff(run: api.RunResult, unsafe_fixes: bool) -> NoReturn:
    """--diff: the fixes as a unified diff, and what they would fix; exit 1 if a file would change."""
    changed = [fixed for fixed in run.fixes if fixed.changed]
    click.echo("".join(unified_diff(fixed, _display(str(fixed.path))) for fixed in changed), nl=False)
    unsafe = 0 if unsafe_fixes else fixable(run.findings)[1]
    more = f" ({unsafe} more with --unsafe-fixes)" if unsafe else ""
    click.echo(f"Would fix {plural(run.fixed, 'error')}{more}.", err=True)
    sys.exit(EXIT_FINDINGS if changed else EXIT_CLEAN)


def _confirm(
    findings: list[Finding], resolver: config.Resolver, devices: tuple[str, ...], timeout: float, quiet: bool
) -> list[Finding]:
    """--confirm: the only path on which the checked project's code runs (see runtime/confirm.py)."""
    from .runtime.confirm import ConfirmOptions, confirmed, torch_installed

    if not torch_installed():
        fail("--confirm needs torch: pip install 'torchlint-inplace[runtime]'")
    paths = sorted({finding.path for finding in findings if finding.code != NOT_CHECKED_CODE})
    specs = {name: json.loads(spec) for path in paths for name, spec in resolver.for_path(path).confirm}
    options = ConfirmOptions(devices, timeout, specs=specs)
    with click.progressbar(length=len(paths), label="Confirming", file=sys.stderr, hidden=quiet or not paths) as bar:
        return confirmed(findings, options, on_file_done=lambda _: bar.update(1))


# ----------------------------------------------------------------------------- reporting


def _write(
    report: Report, format_: str, output_file: Path | None, statistics: bool, quiet: bool, color: str, out: TextIO
) -> None:
    if output_file is not None:
        output_file.parent.mkdir(parents=True, exist_ok=True)
        with output_file.open("w", encoding="utf-8") as stream:
            _render(report, format_, stream, terminal.colour_enabled(color, stream), statistics, quiet)
    else:
        _render(report, format_, out, terminal.colour_enabled(color, out), statistics, quiet)


def _render(report: Report, format_: str, stream: TextIO, color: bool, statistics: bool, quiet: bool) -> None:
    if statistics:
        write_statistics(report, stream, format_ == "json", quiet)
    elif quiet and format_ in SUMMARISED_FORMATS:
        buffer = io.StringIO()
        write_report(format_, report, buffer, color)
        stream.write(_without_summary(buffer.getvalue()))
    else:
        write_report(format_, report, stream, color)


def _without_summary(text: str) -> str:
    """The human formats' output minus the closing summary line they always end with."""
    body = text.rstrip("\n").rpartition("\n")[0].rstrip("\n")
    return body + "\n" if body else ""


@main.command()
@click.argument("code", required=False, metavar="CODE|NAME")
@click.option("--all", "show_all", is_flag=True, help="Print the documentation of every rule, TIP000 included.")
def rule(code: str | None, show_all: bool) -> None:
    """Explain a rule (by code or name): what it flags, why it breaks autograd, examples and its fix."""
    if show_all == (code is not None):
        raise click.UsageError("give either a rule code or name, or --all")
    if show_all:
        click.echo(ruledoc.render_all(), nl=False)
        return
    assert code is not None
    if code.upper() == NOT_CHECKED_CODE or code == NOT_CHECKED_NAME:
        click.echo(ruledoc.NOT_CHECKED_DOC, nl=False)
    elif (rule_class := registry.find(code)) is not None:
        click.echo(ruledoc.render(rule_class), nl=False)
    else:
        fail(f"unknown rule code or name {code!r}; `torchlint-inplace rule --all` lists every rule")


@main.command()
def server() -> None:
    """Start the language server (LSP over stdio) for editors; needs the `lsp` extra."""
    try:
        from .server.app import run
    except ImportError as error:
        if (error.name or "").partition(".")[0] not in ("pygls", "lsprotocol"):
            raise
        fail("`torchlint-inplace server` needs pygls: pip install 'torchlint-inplace[lsp]'")
    run()


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--fail-fast", is_flag=True, help="Raise at the in-place write itself instead of at backward().")
@click.option(
    "--format",
    "format_",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="How the report is written.",
)
@click.option(
    "-o",
    "--output-file",
    type=click.Path(dir_okay=False, writable=True),
    help="Write the report there instead of stderr.",
)
@click.option(
    "--fail-on-silent", is_flag=True, help="Exit 1 when silent corruption was seen, even if the script succeeded."
)
@click.argument("script", type=click.Path(dir_okay=False))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def trace(
    fail_fast: bool, format_: str, output_file: str | None, fail_on_silent: bool, script: str, args: Sequence[str]
) -> None:
    """Run SCRIPT [ARGS]... under the culprit tracer (needs torch): an in-place error names the line
    that saved the tensor and the line that modified it, and silent corruption seen while it runs
    is reported. Exits with the script's exit code (1 for an in-place error)."""
    try:
        from .runtime.script import run_script
    except ImportError as error:
        if (error.name or "").partition(".")[0] != "torch":
            raise
        fail("`torchlint-inplace trace` needs torch: pip install 'torchlint-inplace[runtime]'")
    sys.exit(
        run_script(script, args, fail_fast=fail_fast, format=format_, output=output_file, fail_on_silent=fail_on_silent)
    )
