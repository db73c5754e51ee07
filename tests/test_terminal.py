"""What the command does for a person at a terminal, and only there: a progress indicator on
stderr for large runs, and Ctrl-C answered with one line and exit status 130.

These run the command in a subprocess, with stderr on a pseudo-terminal where a terminal is
the point, so that `isatty` and signals behave as they do for users.
"""

from __future__ import annotations

import io
import os
import pty
import select
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from torchlint_inplace import terminal
from torchlint_inplace.cli import INTERRUPTED
from torchlint_inplace.terminal import PROGRESS_FROM

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
COMMAND = [sys.executable, "-m", "torchlint_inplace", "--isolated", "--no-cache"]


def _environment() -> dict[str, str]:
    """The user's environment, minus what says "CI" (CI runs this suite with CI=true)."""
    return {name: value for name, value in os.environ.items() if name not in ("CI", "NO_COLOR", "FORCE_COLOR")}


def _many_files(root: Path, count: int, text: str) -> Path:
    root.mkdir()
    for index in range(count):
        (root / f"m{index:04d}.py").write_text(text)
    return root


def _stderr_on_a_terminal(
    args: list[str], cwd: Path, environment: dict[str, str] | None = None
) -> tuple[int, str, str]:
    """Runs the command with stderr on a pseudo-terminal; its exit status, stdout and stderr."""
    controller, terminal = pty.openpty()
    env = _environment() if environment is None else environment
    process = subprocess.Popen([*COMMAND, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=terminal, env=env)
    os.close(terminal)
    received = b""
    while True:
        ready, _, _ = select.select([controller], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the other end closed
            break
        if not chunk:
            break
        received += chunk
    stdout, _ = process.communicate(timeout=120)
    os.close(controller)
    return process.returncode, stdout.decode(), received.decode()


@pytest.fixture(scope="module")
def large_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _many_files(tmp_path_factory.mktemp("run") / "tree", PROGRESS_FROM + 1, "x = 1\n")


def test_a_large_run_on_a_terminal_shows_progress_and_clears_it(large_run: Path) -> None:
    status, stdout, stderr = _stderr_on_a_terminal(["--jobs", "1", str(large_run)], large_run.parent)
    assert status == 0 and stdout == "All checks passed!\n"
    assert (
        f"\rChecking files: 1/{PROGRESS_FROM + 1}" in stderr
        and f"\rChecking files: {PROGRESS_FROM + 1}/{PROGRESS_FROM + 1}" in stderr
    )
    assert stderr.endswith("\r\x1b[K")  # the line is wiped before the report


def test_no_progress_for_machine_formats_quiet_runs_or_in_a_pipe(large_run: Path) -> None:
    for option in ("--format=json", "--quiet"):
        assert _stderr_on_a_terminal([option, "--jobs", "1", str(large_run)], large_run.parent)[2] == ""
    piped = subprocess.run(
        [*COMMAND, "--jobs", "1", str(large_run)], capture_output=True, text=True, env=_environment(), timeout=120
    )
    assert piped.returncode == 0 and piped.stderr == ""


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("human", "ci", "terminal_stream", "shown"),
    [(True, "", True, True), (False, "", True, False), (True, "true", True, False), (True, "", False, False)],
)
def test_progress_is_for_people_at_a_terminal_only(
    monkeypatch: pytest.MonkeyPatch, human: bool, ci: str, terminal_stream: bool, shown: bool
) -> None:
    monkeypatch.setenv("CI", ci)
    stream = _Terminal() if terminal_stream else io.StringIO()
    assert (terminal.progress(stream, human) is not None) is shown


def test_progress_waits_for_a_large_run_and_wipes_its_line() -> None:
    stream = _Terminal()
    small = terminal.Progress(stream)
    small(1, PROGRESS_FROM - 1)
    small.close()
    assert stream.getvalue() == ""
    large = terminal.Progress(stream)
    large(1, PROGRESS_FROM)
    large.close()
    assert stream.getvalue() == f"\rChecking files: 1/{PROGRESS_FROM}\r\x1b[K"


def test_ctrl_c_in_the_middle_of_a_parallel_run_exits_130_with_one_line(tmp_path: Path) -> None:
    """SIGINT lands while the workers check files (the verbose configuration line is printed
    just before they start): one line on stderr, status 130, no traceback from any process."""
    tree = tmp_path / "tree"
    tree.mkdir()
    for index in range(600):
        shutil.copy(FIXTURES / "tip001" / "saved_tensors.py", tree / f"m{index:04d}.py")
    process = subprocess.Popen(
        [*COMMAND, "--verbose", "--jobs", "2", str(tree)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_environment(),
        text=True,
        # A suite started in the background by a non-interactive shell inherits SIGINT ignored,
        # and Python then keeps ignoring it: the command would rightly run to the end.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert process.stderr is not None
    first = process.stderr.readline()
    assert first.startswith("configuration: "), first
    process.send_signal(signal.SIGINT)
    stdout, rest = process.communicate(timeout=120)
    assert process.returncode == 130, (stdout[-500:], rest)
    assert rest == INTERRUPTED + "\n" and stdout == ""
