"""The file system misbehaving under a whole run: symlink loops, unreadable files and
directories, files deleted mid-run, odd names, files that cannot be written, a full disk.

Each case goes through the command (in-process, one job) and asserts that the run finishes
with a clear per-file message, checks the other files, and never loses or half-writes a file.
We run as root in CI, where permission bits do not stop reads or writes, so permission errors
are simulated by making the call fail; the real-permission test runs only where they bite.
"""

from __future__ import annotations

import builtins
import errno
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner, Result

from torchlint_inplace import api, cli
from torchlint_inplace.fixes import apply

# `h` is a local nobody else reads: its fix (`h = h.mul(2)`) is safe and applied by --fix.
HAZARD = """\
import torch
from torch import nn


class M(nn.Module):
    def forward(self, x):
        h = torch.sigmoid(x)
        h.mul_(2)
        return h
"""
FIXED_LINE = "        h = h.mul(2)\n"

REPO = Path(__file__).resolve().parents[1]
JSON_SCHEMA = REPO / "docs" / "json-schema.json"
SARIF_SCHEMA = REPO.parent / "shared" / "data" / "sarif-schema-2.1.0.json"  # beside the checkout, not in it


def lint(*args: str | Path) -> Result:
    return CliRunner().invoke(
        cli.main, ["--isolated", "--no-cache", "--jobs", "1", "--format", "json", *map(str, args)]
    )


def findings(result: Result) -> list[dict]:
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return json.loads(result.stdout)["findings"]


def codes_by_file(result: Result) -> dict[str, list[str]]:
    by_file: dict[str, list[str]] = {}
    for finding in findings(result):
        by_file.setdefault(Path(finding["filename"]).name, []).append(finding["code"])
    return by_file


@pytest.fixture
def hazard(tmp_path: Path) -> Path:
    path = tmp_path / "model.py"
    path.write_text(HAZARD)
    return path


def test_symlink_loops_end_and_the_real_file_is_checked(tmp_path: Path, hazard: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "up").symlink_to(tmp_path, target_is_directory=True)
    (tmp_path / "a.py").symlink_to(tmp_path / "b.py")
    (tmp_path / "b.py").symlink_to(tmp_path / "a.py")
    result = lint(tmp_path)
    assert result.exit_code == 1
    assert codes_by_file(result) == {"model.py": ["TIP001"]}  # once, not once per loop turn


def test_a_named_symlink_loop_is_a_per_file_error(tmp_path: Path, hazard: Path) -> None:
    (tmp_path / "a.py").symlink_to(tmp_path / "b.py")
    (tmp_path / "b.py").symlink_to(tmp_path / "a.py")
    result = lint(tmp_path / "a.py", hazard)
    by_message = {Path(f["filename"]).name: f["message"] for f in findings(result)}
    assert result.exit_code == 1
    assert "symbolic links" in by_message["a.py"] and by_message["model.py"].startswith("`h.mul_()`")


def _deny(monkeypatch: pytest.MonkeyPatch, module, name: str, denied: Path) -> None:
    """Makes `module.name(path, ...)` raise PermissionError for `denied`, as for a non-root user."""
    original = getattr(module, name) if hasattr(module, name) else getattr(builtins, name)

    def guarded(path, *args, **kwargs):
        if Path(path) == denied:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return original(path, *args, **kwargs)

    monkeypatch.setattr(module, name, guarded, raising=False)


def test_unreadable_file_is_reported_and_the_rest_checked(
    tmp_path: Path, hazard: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "secret.py"
    secret.write_text(HAZARD)
    from torchlint_inplace import source

    _deny(monkeypatch, source, "open", secret)  # source.read's open(); builtins stay untouched
    result = lint(tmp_path)
    messages = {Path(f["filename"]).name: f["message"] for f in findings(result)}
    assert result.exit_code == 1
    assert messages["secret.py"] == "cannot read file: permission denied"
    assert "model.py" in messages


def messages_by_path(result: Result, root: Path) -> dict[str, str]:
    return {Path(f["filename"]).relative_to(root).as_posix(): f["message"] for f in findings(result)}


def test_unreadable_directory_is_reported_and_the_rest_checked(
    tmp_path: Path, hazard: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "inner.py").write_text(HAZARD)
    _deny(monkeypatch, os, "scandir", locked)
    result = lint(tmp_path)
    assert result.exit_code == 1
    assert codes_by_file(result) == {"locked": ["TIP000"], "model.py": ["TIP001"]}
    assert messages_by_path(result, tmp_path)["locked"] == "cannot read directory: permission denied"


def _unprivileged_prefix(probe: Path) -> list[str] | None:
    """A command prefix under which permission bits bite: none for a normal user; for root, a
    new user namespace (`unshare --user`), where root's capabilities do not reach the files
    outside it. None where neither stops reading `probe`, a file of mode 0."""
    candidates = [[]] if os.geteuid() != 0 else [["unshare", "--user"]] if shutil.which("unshare") else []
    for prefix in candidates:
        attempt = subprocess.run([*prefix, sys.executable, "-c", f"open({str(probe)!r}).close()"], capture_output=True)
        if b"PermissionError" in attempt.stderr:
            return prefix
    return None


@pytest.fixture
def lint_unprivileged(tmp_path: Path) -> Callable[..., subprocess.CompletedProcess]:
    """Runs the command in a child process for which modes are obeyed, even when we are root."""
    probe = tmp_path / "probe"
    probe.touch(mode=0)
    prefix = _unprivileged_prefix(probe)
    probe.unlink()
    if prefix is None:
        pytest.skip("permission bits do not stop this user, and no user namespace is available")
    command = [
        *prefix,
        sys.executable,
        "-m",
        "torchlint_inplace",
        "--isolated",
        "--no-cache",
        "--jobs",
        "1",
        "--format",
        "json",
    ]
    return lambda *paths: subprocess.run([*command, *map(str, paths)], capture_output=True, text=True, cwd=tmp_path)


def real_messages(run: subprocess.CompletedProcess) -> dict[str, str]:
    """Message by path as the report shows it: relative to the run's directory."""
    assert "Traceback" not in run.stderr and run.returncode in (0, 1), run.stderr
    return {f["filename"]: f["message"] for f in json.loads(run.stdout)["findings"]}


def test_really_unreadable_file(tmp_path: Path, hazard: Path, lint_unprivileged) -> None:
    (tmp_path / "secret.py").touch(mode=0)
    run = lint_unprivileged(tmp_path)
    messages = real_messages(run)
    assert run.returncode == 1 and messages.pop("model.py").startswith("`h.mul_()`")
    assert messages == {"secret.py": "cannot read file: permission denied"}


@pytest.mark.parametrize("mode", [0, 0o644], ids=["unreadable", "unsearchable"])  # cannot list / cannot enter
def test_really_unreadable_directory(tmp_path: Path, hazard: Path, lint_unprivileged, mode: int) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "inner.py").write_text(HAZARD)
    locked.chmod(mode)
    try:
        walked, named_directory, named_file = (
            lint_unprivileged(path) for path in (tmp_path, locked, locked / "inner.py")
        )
    finally:
        locked.chmod(0o755)
    assert walked.returncode == named_directory.returncode == named_file.returncode == 1
    messages = real_messages(walked)
    assert messages.pop("model.py").startswith("`h.mul_()`")
    if mode == 0:  # cannot list it
        assert messages == real_messages(named_directory) == {"locked": "cannot read directory: permission denied"}
    else:  # lists, but cannot enter: its file is found and cannot be read
        assert messages == real_messages(named_directory) == {"locked/inner.py": "cannot read file: permission denied"}
    assert real_messages(named_file) == {"locked/inner.py": "cannot read file: permission denied"}


def test_directory_removed_mid_walk_is_reported_and_the_rest_checked(
    tmp_path: Path, hazard: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doomed = tmp_path / "doomed"
    (doomed / "deeper").mkdir(parents=True)
    (doomed / "deeper" / "inner.py").write_text(HAZARD)
    scandir = os.scandir

    def listing_then_removal(path):
        """Lists `path`, then another process removes `doomed` before the walk enters it."""
        if path != tmp_path:  # deeper listings, and rmtree's own
            return scandir(path)
        entries = list(scandir(path))
        shutil.rmtree(doomed)
        return iter(entries)

    monkeypatch.setattr(os, "scandir", listing_then_removal)
    result = lint(tmp_path)
    assert result.exit_code == 1
    assert messages_by_path(result, tmp_path) == {
        "doomed": "cannot read directory: it no longer exists (removed during the run?)",
        "model.py": findings(result)[-1]["message"],
    }
    assert codes_by_file(result) == {"doomed": ["TIP000"], "model.py": ["TIP001"]}


def test_named_broken_symlink_is_a_per_path_error(tmp_path: Path, hazard: Path) -> None:
    (tmp_path / "dangling.py").symlink_to(tmp_path / "moved_away.py")
    result = lint(tmp_path / "dangling.py", hazard)
    assert result.exit_code == 1
    assert (
        messages_by_path(result, tmp_path)["dangling.py"]
        == f"broken symbolic link: its target {tmp_path / 'moved_away.py'} does not exist"
    )
    assert codes_by_file(result) == {"dangling.py": ["TIP000"], "model.py": ["TIP001"]}


def test_broken_symlink_met_in_a_walk_is_skipped(tmp_path: Path, hazard: Path) -> None:
    (tmp_path / ".#model.py").symlink_to("root@host.1234:1700000000")  # an Emacs lock file
    assert codes_by_file(lint(tmp_path)) == {"model.py": ["TIP001"]}


@pytest.mark.parametrize("format", ["json", "sarif"])
def test_unsearchable_paths_keep_machine_formats_valid(
    tmp_path: Path, hazard: Path, monkeypatch: pytest.MonkeyPatch, format: str
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    (tmp_path / "dangling.py").symlink_to(tmp_path / "nowhere.py")
    _deny(monkeypatch, os, "scandir", locked)
    schema = JSON_SCHEMA if format == "json" else SARIF_SCHEMA
    if not schema.exists():
        pytest.skip(f"{schema} is absent")
    result = CliRunner().invoke(
        cli.main,
        ["--isolated", "--no-cache", "--jobs", "1", "--format", format, str(tmp_path), str(tmp_path / "dangling.py")],
    )
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    jsonschema.validate(document, json.loads(schema.read_text(encoding="utf-8")))
    reported = json.dumps(document)
    assert "cannot read directory: permission denied" in reported and "broken symbolic link" in reported


def test_unsearchable_paths_follow_the_exit_code_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    _deny(monkeypatch, os, "scandir", locked)
    assert lint(tmp_path).exit_code == 1  # a TIP000 finding, as for an unreadable file
    assert lint("--exit-zero", tmp_path).exit_code == 0


def test_file_deleted_after_discovery_is_a_per_file_error(
    tmp_path: Path, hazard: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = tmp_path / "gone.py"
    monkeypatch.setattr(api, "discover", lambda paths, settings, on_error: (gone, hazard))
    result = lint(tmp_path)
    messages = {Path(f["filename"]).name: f["message"] for f in findings(result)}
    assert result.exit_code == 1
    assert messages["gone.py"] == "no such file or directory" and "model.py" in messages


def test_file_deleted_between_check_and_fix_is_not_recreated(hazard: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fix_files = api.fix_files

    def delete_first(results, relint, unsafe):
        hazard.unlink()
        return fix_files(results, relint, unsafe)

    monkeypatch.setattr(api, "fix_files", delete_first)
    result = lint("--fix", hazard)
    assert result.exit_code == 1 and [f["code"] for f in findings(result)] == ["TIP001"]
    assert not hazard.exists()


def test_spaces_and_non_ascii_names_are_checked_and_fixed(tmp_path: Path) -> None:
    directory = tmp_path / "my models" / "módulos ünïcode"
    directory.mkdir(parents=True)
    path = directory / "réseau neuronal 模型.py"
    path.write_text(HAZARD, encoding="utf-8")
    assert [Path(f["filename"]).name for f in findings(lint(tmp_path))] == [path.name]
    assert lint("--fix", tmp_path).exit_code == 0
    assert FIXED_LINE in path.read_text(encoding="utf-8")


def _no_temporary_files(directory: Path) -> bool:
    return not [name for name in os.listdir(directory) if name.endswith(".tmp")]


def test_read_only_file_is_not_rewritten(hazard: Path) -> None:
    hazard.chmod(0o444)
    result = lint("--fix", hazard)
    assert result.exit_code == 1
    assert "cannot write the fixes to" in result.stderr and "read-only" in result.stderr
    assert hazard.read_text() == HAZARD and _no_temporary_files(hazard.parent)


def test_permission_denied_on_replace_keeps_the_original(hazard: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def denied(source, target):
        raise PermissionError(errno.EACCES, "Permission denied", str(target))

    monkeypatch.setattr(apply.os, "replace", denied)
    result = lint("--fix", hazard)
    assert result.exit_code == 1 and [f["code"] for f in findings(result)] == ["TIP001"]  # still there: not fixed
    assert "cannot write the fixes to" in result.stderr and "Permission denied" in result.stderr
    assert hazard.read_text() == HAZARD and _no_temporary_files(hazard.parent)


def test_full_disk_during_the_write_leaves_nothing_half_written(hazard: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fdopen = os.fdopen

    class FullDisk:
        """A stream that writes half of what it is given, then runs out of space."""

        def __init__(self, descriptor, mode):
            self.stream = fdopen(descriptor, mode)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.stream.close()

        def write(self, data):
            self.stream.write(data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(apply.os, "fdopen", FullDisk)
    result = lint("--fix", hazard)
    assert result.exit_code == 1
    assert "No space left on device" in result.stderr
    assert hazard.read_text() == HAZARD and _no_temporary_files(hazard.parent)
