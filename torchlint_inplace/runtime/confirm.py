"""`--confirm` as a library: prove static findings by running the code that owns them.

User code runs only here, in a child process (`probe.py`) with a wall-clock timeout and an
address-space limit, so a hanging or memory-hungry model costs one file's findings a
`not run: ...` status, never the linter run.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from ..diagnostics import Finding

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MEMORY_BYTES = 8 * 1024**3


def confirm_file(
    path: Path | str,
    findings: Iterable[Finding],
    timeout: float = DEFAULT_TIMEOUT_S,
    memory_bytes: int = DEFAULT_MEMORY_BYTES,
) -> dict[Finding, str]:
    """Each finding's status: `confirmed: raises`, `benign`, `not reached` or `not run: <reason>`."""
    findings = list(findings)
    lines = sorted({finding.line for finding in findings})
    by_line = _run_probe(Path(path), lines, timeout, memory_bytes)
    return {finding: by_line[finding.line] for finding in findings}


def _run_probe(path: Path, lines: list[int], timeout: float, memory_bytes: int) -> dict[int, str]:
    if not lines:
        return {}
    with tempfile.TemporaryDirectory(prefix="torchlint-confirm-") as scratch:
        output = Path(scratch) / "statuses.json"
        command = [sys.executable, "-m", "torchlint_inplace.runtime.probe", str(path), str(output), *map(str, lines)]
        try:
            result = subprocess.run(
                command,
                cwd=scratch,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
                preexec_fn=lambda: _limit_memory(memory_bytes),
            )
        except subprocess.TimeoutExpired:
            return dict.fromkeys(lines, f"not run: killed after the {timeout:g}s timeout")
        if not output.exists():
            last = (result.stderr.strip().splitlines() or [f"exit code {result.returncode}"])[-1]
            return dict.fromkeys(lines, f"not run: the confirmation process failed: {last}")
        return {int(line): status for line, status in json.loads(output.read_text(encoding="utf-8")).items()}


def _limit_memory(memory_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
