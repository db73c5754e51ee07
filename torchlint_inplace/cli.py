"""The `torchlint-inplace` command, shaped like ruff's so CI scripts and habits carry over.

`torchlint-inplace [OPTIONS] [PATHS]...` and `torchlint-inplace check ...` are the same
command; `rule CODE` / `rule --all` prints documentation. Exit codes: 0 nothing found,
1 findings, 2 usage, configuration or internal error (one `error: ...` line on stderr; the
traceback only with --verbose).
"""

from __future__ import annotations

import io
import json
import os
import sys
import traceback
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

import click

from . import __version__, config, registry, ruledoc
from .diagnostics import NOT_CHECKED_CODE, Applicability, Finding, not_checked
from .discovery import discover
from .reporters import REPORTERS, Report, write_report
from .fixes.apply import FileFix
from .fixes.run import after_fixes, applied_summary, fix_results, rejected_notes, unified_diff
from .parallel import default_jobs
from .runner import check_files

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2

# Formats whose reporter ends with the closing summary line, which --quiet leaves out.
SUMMARISED_FORMATS = ("full", "concise")


class CheckByDefault(click.Group):
    """A group whose first argument, unless it names a subcommand or a group option, starts
    `check`: `torchlint-inplace src/`, `torchlint-inplace --select TIP001 .` and a path named
    like `rule.py` all check. (A path named exactly `check` or `rule` needs `check` before it.)"""

    GROUP_OPTIONS = ("--help", "-h", "--version")

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in self.GROUP_OPTIONS):
            args = ["check", *args]
        return super().parse_args(ctx, args)


def fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_ERROR)


@click.group(cls=CheckByDefault, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="torchlint-inplace", message="%(prog)s %(version)s")
def main() -> None:
    """Find the in-place tensor operations that break autograd, before anything runs."""


def _codes_option(name: str, help: str):
    return click.option(name, multiple=True, metavar="CODES", help=help)


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path, readable=False))  # unreadable: TIP000, not a usage error
@_codes_option("--select", "Rule codes or prefixes to enable (comma-separated), replacing the defaults. ALL enables every rule.")
@_codes_option("--extend-select", "Rule codes or prefixes to enable in addition to the selection.")
@_codes_option("--ignore", "Rule codes or prefixes to disable.")
@click.option("--format", "--output-format", "format_", type=click.Choice(list(REPORTERS)), default="full", show_default=True, help="Output format.")
@click.option("--output-file", "-o", type=click.Path(dir_okay=False, path_type=Path), help="Write the report to this file instead of stdout.")
@click.option("--exit-zero", is_flag=True, help="Exit with 0 even when there are findings.")
@click.option("--statistics", is_flag=True, help="Show the number of findings per rule instead of the findings.")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="Use this pyproject.toml, or a .toml file with the same keys at top level.")
@click.option("--isolated", is_flag=True, help="Ignore all configuration files.")
@click.option("--exclude", multiple=True, metavar="GLOBS", help="Globs to exclude from directory walks, replacing the default list (comma-separated).")
@click.option("--extend-exclude", multiple=True, metavar="GLOBS", help="Globs to exclude in addition to the configured ones (comma-separated).")
@click.option("--preview/--no-preview", default=None, help="Also run rules and report findings that are not enabled by default yet.")
@click.option("--quiet", "-q", is_flag=True, help="Print only the findings, no summary.")
@click.option("--verbose", "-v", is_flag=True, help="Show the configuration used and tracebacks of internal errors.")
@click.option("--fix", is_flag=True, help="Apply the safe fixes and report what remains.")
@click.option("--unsafe-fixes", is_flag=True, help="With --fix or --diff, also apply the fixes that may change what other code observes.")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff instead of writing them; exit 1 if a file would change.")
@click.option("--show-fixes", is_flag=True, help="With --fix, list the fixes applied (on stderr).")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Check files in this many processes (default: all cores).")
@click.option("--no-cache", is_flag=True, help="Analyse every file afresh: neither read nor write .torchlint_inplace_cache/.")
@click.option("--confirm", is_flag=True, help="Run the code around each finding (this executes the checked project's code, in a subprocess with a timeout and a memory limit; needs torch) and mark it confirmed, benign, not reached or not run.")
@click.option("--device", "devices", default="cpu", show_default=True, metavar="cpu,cuda|auto", callback=lambda ctx, param, value: _devices(value), help="Where --confirm runs the code; auto: cuda when available, else cpu.")
@click.option("--confirm-timeout", type=click.FloatRange(min=1), default=60.0, show_default=True, metavar="SECONDS", help="How long --confirm lets one file run on one device.")
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
    fix: bool,
    unsafe_fixes: bool,
    diff: bool,
    show_fixes: bool,
    jobs: int | None,
    no_cache: bool,
    confirm: bool,
    devices: tuple[str, ...],
    confirm_timeout: float,
) -> None:
    """Check PATHS (default: the current directory) for hazardous in-place operations."""
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
    findings: list[Finding] = []
    try:
        settings = config.resolve(overrides)
        if verbose:
            click.echo(f"configuration: {settings.config_path or 'defaults (no config file)'}; rules: {', '.join(settings.select) or 'none'}", err=True)
        unsearchable: list[Finding] = []  # directories that cannot be listed, dangling links: TIP000 on the path
        files = discover(paths or [Path(".")], settings, lambda path, why: unsearchable.append(not_checked(str(path), why)))
        results = check_files(files, settings, jobs=jobs or default_jobs(), use_cache=not no_cache)
        if verbose:
            for result in results:
                if result.traceback:
                    click.echo(f"internal error in {result.path}:\n{result.traceback}", err=True)
        fixes = fix_results(results, settings, unsafe_fixes) if fix or diff else []
        fixes = _apply_fixes(fixes, diff, show_fixes)
        results = after_fixes(results, fixes)
        findings = sorted([*unsearchable, *(finding for result in results for finding in result.findings)], key=Finding.sort_key)
        if confirm:
            findings = _confirm(findings, settings, devices, confirm_timeout, quiet)
        report = Report(
            findings=findings,
            files_checked=len(results),
            root=Path.cwd(),
            sources={result.path: result.text for result in results if result.findings and result.text is not None},
            fixed=sum(len(fixed.result.applied) for fixed in fixes),
        )
        _write(report, format_, output_file, statistics, quiet)
    except config.ConfigError as error:
        fail(str(error))
    except BrokenPipeError:  # the reader stopped early (`| head`): what it read stands, the status too
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except Exception as error:  # a bug of ours: one line, the traceback only on request
        if verbose:
            traceback.print_exc()
        fail(f"internal error: {type(error).__name__}: {error}" + ("" if verbose else " (run with --verbose for the traceback)"))
    sys.exit(EXIT_CLEAN if exit_zero or not findings else EXIT_FINDINGS)


def _devices(value: str) -> tuple[str, ...]:
    devices = tuple(dict.fromkeys(device.strip() for device in value.split(",") if device.strip()))
    if devices == ("auto",) or (devices and set(devices) <= {"cpu", "cuda"}):
        return devices
    raise click.BadParameter("give cpu, cuda, cpu,cuda or auto")


def _confirm(findings: list[Finding], settings: config.Settings, devices: tuple[str, ...], timeout: float, quiet: bool) -> list[Finding]:
    """--confirm: the only path on which the checked project's code runs (see runtime/confirm.py)."""
    from .runtime.confirm import ConfirmOptions, confirmed, torch_installed

    if not torch_installed():
        fail("--confirm needs torch: pip install 'torchlint-inplace[runtime]'")
    options = ConfirmOptions(devices, timeout, specs={name: json.loads(spec) for name, spec in settings.confirm})
    files = len({finding.path for finding in findings if finding.code != NOT_CHECKED_CODE})
    with click.progressbar(length=files, label="Confirming", file=sys.stderr, hidden=quiet or not files) as bar:
        return confirmed(findings, options, on_file_done=lambda _: bar.update(1))


def _apply_fixes(fixes: Sequence[FileFix], diff: bool, show_fixes: bool) -> list[FileFix]:
    """Writes the fixed files and returns those written, or with --diff prints them and exits
    (1 when a file would change). A file that cannot be written is reported and left as it was."""
    display = Report([], 0, Path.cwd()).display_path
    for note in rejected_notes(fixes, display):
        click.echo(note, err=True)
    changed = [fixed for fixed in fixes if fixed.changed]
    if diff:
        click.echo("".join(unified_diff(fixed, display(str(fixed.path))) for fixed in changed), nl=False)
        count = sum(len(fixed.result.applied) for fixed in changed)
        click.echo(f"Would fix {count} error{'s' if count != 1 else ''}.", err=True)
        sys.exit(EXIT_FINDINGS if changed else EXIT_CLEAN)
    written = []
    for fixed in changed:
        try:
            fixed.write()
            written.append(fixed)
        except (OSError, UnicodeError) as error:
            click.echo(f"warning: cannot write the fixes to {display(str(fixed.path))}: {error}", err=True)
    if show_fixes and written:
        click.echo(applied_summary(written, display), err=True, nl=False)
    return written


def _write(report: Report, format_: str, output_file: Path | None, statistics: bool, quiet: bool) -> None:
    if output_file is not None:
        output_file.parent.mkdir(parents=True, exist_ok=True)
        with output_file.open("w", encoding="utf-8") as stream:
            _render(report, format_, stream, False, statistics, quiet)
    else:
        color = sys.stdout.isatty() and "NO_COLOR" not in os.environ
        _render(report, format_, sys.stdout, color, statistics, quiet)


def _render(report: Report, format_: str, stream: TextIO, color: bool, statistics: bool, quiet: bool) -> None:
    if statistics:
        _write_statistics(report.findings, format_, stream)
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


def _write_statistics(findings: Sequence[Finding], format_: str, stream: TextIO) -> None:
    """One row per code, most frequent first, as `ruff --statistics` prints them."""
    counts = Counter(finding.code for finding in findings)
    names = {finding.code: finding.name for finding in findings}
    fixable = {f.code for f in findings if f.fix is not None and f.fix.applicability is Applicability.SAFE}
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    if format_ == "json":
        data = [{"code": code, "name": names[code], "count": count, "fixable": code in fixable} for code, count in rows]
        stream.write(json.dumps(data, indent=2) + "\n")
        return
    count_width = max((len(str(count)) for _, count in rows), default=1)
    code_width = max((len(code) for code, _ in rows), default=1)
    for code, count in rows:
        marker = "[*]" if code in fixable else "[ ]"
        stream.write(f"{count:>{count_width}}\t{code:<{code_width}}\t{marker} {names[code]}\n")


@main.command()
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="Print the documentation of every rule.")
def rule(code: str | None, show_all: bool) -> None:
    """Explain a rule: what it flags, why it breaks autograd, examples and its fix."""
    if show_all == (code is not None):
        raise click.UsageError("give either a rule code or --all")
    if show_all:
        click.echo("\n".join(ruledoc.render(rule_class) for rule_class in registry.all_rules()), nl=False)
    elif code.upper() == NOT_CHECKED_CODE:
        click.echo(ruledoc.NOT_CHECKED_DOC, nl=False)
    elif (rule_class := registry.rule_by_code(code.upper())) is not None:
        click.echo(ruledoc.render(rule_class), nl=False)
    else:
        fail(f"unknown rule code {code!r}; `torchlint-inplace rule --all` lists every rule")


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--fail-fast", is_flag=True, help="Raise at the in-place write itself instead of at backward().")
@click.option("--format", "format_", type=click.Choice(["text", "json"]), default="text", show_default=True, help="How the report is written.")
@click.option("-o", "--output-file", type=click.Path(dir_okay=False, writable=True), help="Write the report there instead of stderr.")
@click.option("--fail-on-silent", is_flag=True, help="Exit 1 when silent corruption was seen, even if the script succeeded.")
@click.argument("script", type=click.Path(dir_okay=False))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def trace(fail_fast: bool, format_: str, output_file: str | None, fail_on_silent: bool, script: str, args: Sequence[str]) -> None:
    """Run SCRIPT [ARGS]... under the culprit tracer (needs torch): an in-place error names the line
    that saved the tensor and the line that modified it, and silent corruption seen while it runs
    is reported. Exits with the script's exit code (1 for an in-place error)."""
    try:
        from .runtime.script import run_script
    except ImportError as error:
        if (error.name or "").partition(".")[0] != "torch":
            raise
        fail("`torchlint-inplace trace` needs torch: pip install 'torchlint-inplace[runtime]'")
    sys.exit(run_script(script, args, fail_fast=fail_fast, format=format_, output=output_file, fail_on_silent=fail_on_silent))
