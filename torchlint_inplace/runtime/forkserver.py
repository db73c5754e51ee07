"""The confirmation server: imports torch once, then forks one supervised child per file and device.

Importing torch (and the dispatch machinery the tracer wakes) costs seconds; user code must
still run in a process of its own. So `confirm.py` starts this server, which pays the import
once and forks a child per request (file x device) that inherits it. The server supervises each
child, so nothing the code under test does reaches the linter:

- the child leads its own process group (whatever it forks is killed with it); the server is a
  child subreaper (Linux), so a process that left the group (`setsid()`) is re-parented to it
  once its parent dies, and is killed when the file is done; the child has stdin on
  /dev/null, a memory limit (address space, CPU runs), and the file's project root as cwd;
- its stdout/stderr go to a pipe the server drains, keeping only the tail: megabytes of prints
  cost nothing but time;
- statuses come back on a separate pipe, one JSON object per update, written only by the child
  itself (not by a process the user's code forked from it), so a crash keeps what was proven;
- it is killed at the timeout; lines it never reported get `not run: <why it ended>`.

The torch state is forked before any op ran and before CUDA was touched, so both work in the
child. Protocol: one JSON request per line on stdin, one JSON response per line on stdout.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import selectors
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from .fixed import fix_from_json
from .inputs import spec_from_json
from .probe import probe
from .request import Request
from .statuses import stronger

OUTPUT_TAIL_BYTES = 8192
# After the child ended, how long its leftover output may take to arrive.
DRAIN_S = 1.0
PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
# How long ending a file's leftover processes may take (each round kills one generation).
REAP_S = 5.0


def _child(request: dict[str, Any], device: str, result_fd: int, output_fd: int) -> None:
    """Runs in the forked child; never returns."""
    try:
        os.setpgid(0, 0)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        # CUDA reserves address space far beyond any sensible limit.
        limit = int(request["memory_bytes"]) if device == "cpu" else None
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        os.chdir(request["root"])
        sys.path.insert(0, request["root"])
        owner = os.getpid()
        results = os.fdopen(result_fd, "w", encoding="utf-8")

        def emit(update: dict[int, str]) -> None:
            if os.getpid() == owner:  # not from a process the code under test forked
                results.write(json.dumps(update) + "\n")
                results.flush()

        codes = {int(line): codes for line, codes in request["codes"].items()}
        specs = {name: spec_from_json(spec) for name, spec in request.get("specs", {}).items()}
        fixes = {
            int(line): {code: fix_from_json(fix) for code, fix in by_code.items()}
            for line, by_code in request.get("fixes", {}).items()
        }
        probe(Request(Path(request["file"]), codes, device, specs, fixes, limit), emit)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(0)


def _ending(status: int | None, timeout: float, tail: bytes) -> str:
    """Why lines the child never reported were not run."""
    if status is None:
        return f"not run: killed after the {timeout:g}s timeout"
    last = next((line.strip() for line in reversed(tail.decode("utf-8", "replace").splitlines()) if line.strip()), "")
    detail = f" ({last[:200]})" if last else ""
    if os.WIFSIGNALED(status):
        return f"not run: the process died of {signal.Signals(os.WTERMSIG(status)).name}{detail}"
    return f"not run: the code ended the process with exit code {os.WEXITSTATUS(status)}{detail}"


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _become_subreaper() -> None:
    """Orphans below this process are re-parented to it rather than to init (Linux only; a
    no-op elsewhere, where killing the child's process group is all there is)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _children() -> list[int]:
    pids: list[int] = []
    for listing in Path("/proc/self/task").glob("*/children"):
        try:
            pids += map(int, listing.read_text().split())
        except OSError:  # a thread that just ended
            pass
    return pids


def _end_leftovers() -> None:
    """Kills and reaps every process still below the server once a file's child has been reaped:
    what the code under test forked and moved out of the child's process group. Killing one
    re-parents its own children here, so this repeats until none is left."""
    deadline = time.monotonic() + REAP_S
    while (pids := _children()) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in pids:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def supervise(request: dict[str, Any], device: str) -> dict[int, str]:
    """Forks the child for one file on one device and collects its statuses."""
    result_r, result_w = os.pipe()
    output_r, output_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(result_r)
        os.close(output_r)
        _child(request, device, result_w, output_w)
    os.close(result_w)
    os.close(output_w)
    timeout = float(request["timeout"])
    deadline = time.monotonic() + timeout
    statuses: dict[int, str] = {}
    pending = b""
    tail = b""
    selector = selectors.DefaultSelector()
    selector.register(result_r, selectors.EVENT_READ)
    selector.register(output_r, selectors.EVENT_READ)
    status: int | None = None
    timed_out = False
    drain_until: float | None = None
    while selector.get_map():
        now = time.monotonic()
        if drain_until is None and now >= deadline:
            timed_out = True
            break
        if drain_until is not None and now >= drain_until:
            break
        for key, _ in selector.select(timeout=0.05):
            data = os.read(key.fd, 65536)
            if not data:
                selector.unregister(key.fd)
            elif key.fd == result_r:
                pending += data
                *complete, pending = pending.split(b"\n")
                for line in complete:
                    for number, text in json.loads(line).items():
                        statuses[int(number)] = stronger(statuses.get(int(number)), text)
            else:
                tail = (tail + data)[-OUTPUT_TAIL_BYTES:]
        if status is None and drain_until is None:
            done, code = os.waitpid(pid, os.WNOHANG)
            if done:
                status = code
                _kill_group(pid)  # whatever the code under test forked
                drain_until = time.monotonic() + DRAIN_S
    selector.close()
    os.close(result_r)
    os.close(output_r)
    if status is None:  # timed out, or closed both pipes and lives on: either way it is over
        _kill_group(pid)
        _, code = os.waitpid(pid, 0)
        status = None if timed_out else code
    _end_leftovers()
    reason = _ending(status, timeout, tail)
    return {line: statuses.get(line, reason) for line in map(int, request["codes"])}


def _cuda_available() -> bool:
    """Asked in a throwaway child: CUDA initialised in this process would not survive a fork."""
    pid = os.fork()
    if pid == 0:
        os._exit(0 if torch.cuda.is_available() else 1)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def devices_for(requested: list[str], cuda_available: bool) -> list[str]:
    if requested == ["auto"]:
        return ["cuda"] if cuda_available else ["cpu"]
    return requested


def combine(per_device: dict[str, dict[int, str]]) -> dict[int, str]:
    """One status per line: the devices' common status, else each device's, named."""
    lines = next(iter(per_device.values())).keys()
    combined = {}
    for line in lines:
        statuses = {device: results[line] for device, results in per_device.items()}
        distinct = set(statuses.values())
        combined[line] = distinct.pop() if len(distinct) == 1 else "; ".join(f"{d}: {s}" for d, s in statuses.items())
    return combined


def serve() -> None:
    _become_subreaper()
    cuda_available: bool | None = None
    for line in sys.stdin:
        request = json.loads(line)
        if cuda_available is None and request["devices"] == ["auto"]:
            cuda_available = _cuda_available()
        devices = devices_for(request["devices"], bool(cuda_available))
        statuses = combine({device: supervise(request, device) for device in devices})
        sys.stdout.write(json.dumps({str(line): status for line, status in statuses.items()}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    try:
        import torch._dynamo  # noqa: F401  (the tracer's dispatch mode loads it on first use: pay once)
    except ImportError:
        pass
    serve()
