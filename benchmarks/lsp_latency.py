"""How long an editor waits for diagnostics: the language server driven over stdio by pygls'
client, as an editor drives it, on a 1,000-line model file (the `fixtures/realworld/` models
joined until they reach 1,000 lines), the server pinned to one core where `taskset` exists.

    python benchmarks/lsp_latency.py [--changes 20] [--lines 1000] [--code-actions]

Each change replaces the whole buffer (a new comment line at the end, so every version is a
new text) and waits for the diagnostics of that version. The time reported is from the change
sent to its diagnostics received, less the server's debounce (`DEBOUNCE_S`, the pause it waits
for typing to stop), so it is what the analysis and the protocol cost; the first open
(imports, the torch tables, the first parse) is reported apart. Beside that wall time, the
server process's CPU time per change (from /proc, where it exists): on a machine shared with
other work the wall time moves with the load, the CPU time far less.

`--code-actions` also asks, after each version's diagnostics, for the code actions at the first
diagnostic (what an editor's light bulb asks when the cursor is there), and reports how long
those take: the first request of a version builds its fixes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pygls import uris
from pygls.lsp.client import BaseLanguageClient

from torchlint_inplace.server.app import DEBOUNCE_S

REPO = Path(__file__).resolve().parent.parent


def model_file(lines: int) -> str:
    """Whole fixture files joined until the text has at least `lines` lines."""
    parts: list[str] = []
    for path in sorted((REPO / "fixtures" / "realworld").glob("*.py")):
        parts.append(path.read_text(encoding="utf-8"))
        if sum(part.count("\n") for part in parts) >= lines:
            break
    return "\n".join(parts)


def cpu_seconds(pid: int) -> float | None:
    """The user + system CPU time of a process so far, where /proc tells it."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def summary(name: str, values: list[float]) -> str:
    values = sorted(values)
    return (
        f"{name}: median {statistics.median(values):.0f} ms, "
        f"p95 {values[int(0.95 * (len(values) - 1))]:.0f} ms, max {values[-1]:.0f} ms"
    )


async def measure(changes: int, lines: int, code_actions: bool) -> None:
    text = model_file(lines)
    command = [sys.executable, "-m", "torchlint_inplace", "server"]
    if shutil.which("taskset"):
        command = ["taskset", "-c", "0", *command]
    client = BaseLanguageClient("lsp-latency", "1")
    arrived: dict[int, float] = {}
    published: dict[int, list[types.Diagnostic]] = {}

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_publish(params: types.PublishDiagnosticsParams) -> None:
        arrived[params.version or 0] = time.perf_counter()
        published[params.version or 0] = list(params.diagnostics)

    await client.start_io(*command)
    assert client._server is not None
    pid = client._server.pid
    with tempfile.TemporaryDirectory() as scratch:
        uri = uris.from_fs_path(str(Path(scratch) / "model.py")) or ""
        await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities()))
        client.initialized(types.InitializedParams())
        started = time.perf_counter()
        client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, text)))
        while 1 not in arrived:
            await asyncio.sleep(0.001)
        first = arrived[1] - started
        waits, cpu, actions = [], [], []
        for version in range(2, changes + 2):
            sent, used = time.perf_counter(), cpu_seconds(pid)
            client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    types.VersionedTextDocumentIdentifier(version=version, uri=uri),
                    [types.TextDocumentContentChangeWholeDocument(text=f"{text}\n# edit {version}\n")],
                )
            )
            while version not in arrived:
                await asyncio.sleep(0.001)
            waits.append((arrived[version] - sent - DEBOUNCE_S) * 1000)
            now = cpu_seconds(pid)
            if used is not None and now is not None:
                cpu.append((now - used) * 1000)
            if code_actions and published[version]:
                asked = time.perf_counter()
                await client.text_document_code_action_async(
                    types.CodeActionParams(
                        text_document=types.TextDocumentIdentifier(uri),
                        range=published[version][0].range,
                        context=types.CodeActionContext(
                            diagnostics=published[version][:1], trigger_kind=types.CodeActionTriggerKind.Automatic
                        ),
                    )
                )
                actions.append((time.perf_counter() - asked) * 1000)
        await client.shutdown_async(None)
        client.exit(None)
    await client.stop()
    print(
        f"file: {text.count(chr(10)) + 1} lines, {len(published[1])} diagnostics; "
        f"server on one core: {bool(shutil.which('taskset'))}"
    )
    print(f"first open (server start-up and first analysis): {first * 1000:.0f} ms")
    print(
        summary(f"change -> diagnostics, debounce ({DEBOUNCE_S * 1000:.0f} ms) excluded, {len(waits)} changes", waits)
    )
    if cpu:
        print(summary("server CPU per change", cpu))
    if actions:
        print(summary("code actions at the first diagnostic, first request of each version", actions))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--lines", type=int, default=1000)
    parser.add_argument("--code-actions", action="store_true", help="also time the code actions of each version")
    options = parser.parse_args()
    asyncio.run(measure(options.changes, options.lines, options.code_actions))


if __name__ == "__main__":
    main()
