"""`--confirm` as a library: prove static findings by running the code that owns them.

This side never imports torch or user code. It starts the confirmation server
(`forkserver.py`) in a controlled environment and asks it, file by file, for each finding
line's status; the server runs every file in a child of its own with a timeout and a memory
limit (see there). If the server itself stops answering, that file's findings get
`not run: ...` and a fresh server takes the next file.
"""

from __future__ import annotations

import importlib.util
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from .. import layout
from ..diagnostics import CONFIRMATION, NOT_CHECKED_CODE, Finding
from .fixed import fix_to_json

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MEMORY_BYTES = 8 * 1024**3
# Room for the server to import torch before the first answer, and slack on each answer.
STARTUP_S, SLACK_S = 120.0, 10.0
# The environment variables the code under test sees from ours; everything else is dropped.
PASSED_ENVIRONMENT = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "VIRTUAL_ENV",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_HOME",
    "LD_LIBRARY_PATH",
)
FIXED_ENVIRONMENT = {
    "PYTHONDONTWRITEBYTECODE": "1",  # leave no __pycache__ in the checked project
    "PYTHONHASHSEED": "0",
    "PYTHONUNBUFFERED": "1",
    "OMP_NUM_THREADS": "1",  # small synthetic inputs: threads only cost start-up
    "MKL_NUM_THREADS": "1",
    "MPLBACKEND": "Agg",
    "TORCHLINT_INPLACE_CONFIRM": "1",  # lets a project tell it is being confirmed
}
NO_TORCH = "not run: --confirm needs torch (pip install 'torchlint-inplace[runtime]')"


@dataclass(frozen=True)
class ConfirmOptions:
    devices: tuple[str, ...] = ("cpu",)  # "cpu", "cuda", or ("auto",): cuda when available
    timeout: float = DEFAULT_TIMEOUT_S  # per file and device
    memory_bytes: int = DEFAULT_MEMORY_BYTES
    specs: Mapping[str, Mapping[str, object]] = field(default_factory=dict)  # class name -> {args, kwargs, inputs}


def torch_installed() -> bool:
    return importlib.util.find_spec("torch") is not None


def project_root(path: Path) -> Path:
    """The working directory a file's code expects: its project's root (the nearest folder with
    a pyproject.toml, setup.py, setup.cfg or .git), else above its outermost package."""
    return layout.project_root(path) or layout.import_root(path)


def _environment() -> dict[str, str]:
    environment = {name: os.environ[name] for name in PASSED_ENVIRONMENT if name in os.environ}
    environment.update(FIXED_ENVIRONMENT)
    package_parent = str(Path(__file__).resolve().parents[2])  # the server must import us
    environment["PYTHONPATH"] = package_parent
    return environment


class Server:
    """One confirmation server process; `ask` sends a request and waits for its answer."""

    def __init__(self, scratch: str) -> None:
        self.log = open(Path(scratch) / "server.log", "w+b")  # noqa: SIM115 (lives with the server)
        self.process = subprocess.Popen(
            [sys.executable, "-P", "-m", "torchlint_inplace.runtime.forkserver"],
            cwd=scratch,
            env=_environment(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            start_new_session=True,  # its own process group, so close() can end all of it
        )
        assert self.process.stdin is not None and self.process.stdout is not None  # both are pipes
        self.requests: IO[bytes] = self.process.stdin
        self.answers: IO[bytes] = self.process.stdout
        self.answered = False
        self.failure = ""  # the server's last words, once it is closed

    def ask(self, request: dict[str, Any], wait_s: float) -> dict[str, Any] | None:
        """The server's answer, or None when it died or missed `wait_s` (it is then closed)."""
        try:
            self.requests.write((json.dumps(request) + "\n").encode())
            self.requests.flush()
        except OSError:
            self.close()
            return None
        deadline = time.monotonic() + wait_s + (0 if self.answered else STARTUP_S)
        with selectors.DefaultSelector() as selector:
            selector.register(self.answers, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if selector.select(timeout=min(1.0, max(0.0, deadline - time.monotonic()))):
                    line = self.answers.readline()
                    if not line:
                        break
                    self.answered = True
                    answer: dict[str, Any] = json.loads(line)
                    return answer
        self.close()
        return None

    def _last_error(self) -> str:
        self.log.seek(0)
        lines = [line.strip() for line in self.log.read().decode("utf-8", "replace").splitlines() if line.strip()]
        return lines[-1][:200] if lines else f"exit code {self.process.returncode}"

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        if self.alive:
            self.requests.close()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.process.wait()
        self.answers.close()
        self.failure = self._last_error()
        self.log.close()


def confirm_files(
    jobs: Iterable[tuple[Path | str, Sequence[Finding]]],
    options: ConfirmOptions = ConfirmOptions(),
    on_file_done: Callable[[Path], None] | None = None,
) -> dict[Finding, str]:
    """Each finding's status: `confirmed: raises`, `confirmed: changes results (<compared with
    what>)`, `benign`, `not reached` or `not run: <reason>`."""
    statuses: dict[Finding, str] = {}
    files = [(Path(os.path.abspath(path)), list(findings)) for path, findings in jobs]
    if not torch_installed():
        return {finding: NO_TORCH for _, findings in files for finding in findings}
    with tempfile.TemporaryDirectory(prefix="torchlint-confirm-") as scratch:
        server: Server | None = None
        try:
            for path, findings in files:
                if findings:
                    server = server if server is not None and server.alive else Server(scratch)
                    by_line = _ask(server, path, findings, options)
                    statuses.update({finding: by_line[finding.line] for finding in findings})
                if on_file_done is not None:
                    on_file_done(path)
        finally:
            if server is not None:
                server.close()
    return statuses


def _ask(server: Server, path: Path, findings: list[Finding], options: ConfirmOptions) -> dict[int, str]:
    codes: dict[str, list[str]] = {}
    fixes: dict[str, dict[str, dict[str, Any]]] = {}  # the fix each finding's `changes results` is judged against
    for finding in findings:
        codes.setdefault(str(finding.line), []).append(finding.code)
        if finding.fix is not None and finding.fix.edits:
            fixes.setdefault(str(finding.line), {})[finding.code] = fix_to_json(finding.fix)
    request = {
        "file": str(path),
        "root": str(project_root(path)),
        "codes": codes,
        "fixes": fixes,
        "devices": list(options.devices),
        "timeout": options.timeout,
        "memory_bytes": options.memory_bytes,
        "specs": {name: dict(spec) for name, spec in options.specs.items()},
    }
    answer = server.ask(request, wait_s=options.timeout * max(1, len(options.devices)) + SLACK_S)
    if answer is None:
        reason = f"not run: the confirmation process failed: {server.failure}"
        return {int(line): reason for line in codes}
    return {int(line): status for line, status in answer.items()}


def confirmed(
    findings: Sequence[Finding], options: ConfirmOptions, on_file_done: Callable[[Path], None] | None = None
) -> list[Finding]:
    """The findings, each rule finding with its status in `properties["confirmation"]`, in order."""
    by_path: dict[str, list[Finding]] = {}
    for finding in findings:
        if finding.code != NOT_CHECKED_CODE:
            by_path.setdefault(finding.path, []).append(finding)
    statuses = confirm_files(by_path.items(), options, on_file_done)
    return [
        replace(finding, properties={**finding.properties, CONFIRMATION: statuses[finding]})
        if finding in statuses
        else finding
        for finding in findings
    ]
