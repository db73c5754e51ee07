"""How long an editor waits for diagnostics: the language server driven over stdio by pygls'
client, as an editor drives it, on a 1,000-line model file (the `fixtures/realworld/` models
joined until they reach 1,000 lines), the server pinned to one core where `taskset` exists.

    python benchmarks/lsp_latency.py [--changes 20] [--lines 1000]

Each change replaces the whole buffer (a new comment line at the end, so every version is a
new text) and waits for the diagnostics of that version. The time reported is from the change
sent to its diagnostics received, less the server's debounce (`DEBOUNCE_S`, the pause it waits
for typing to stop), so it is what the analysis and the protocol cost; the first open
(imports, the torch tables, the first parse) is reported apart.
"""

from __future__ import annotations

import argparse
import asyncio
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


async def measure(changes: int, lines: int) -> None:
    text = model_file(lines)
    command = [sys.executable, "-m", "torchlint_inplace", "server"]
    if shutil.which("taskset"):
        command = ["taskset", "-c", "0", *command]
    client = BaseLanguageClient("lsp-latency", "1")
    arrived: dict[int, float] = {}
    counts: dict[int, int] = {}

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def published(params: types.PublishDiagnosticsParams) -> None:
        arrived[params.version or 0] = time.perf_counter()
        counts[params.version or 0] = len(params.diagnostics)

    await client.start_io(*command)
    with tempfile.TemporaryDirectory() as scratch:
        uri = uris.from_fs_path(str(Path(scratch) / "model.py")) or ""
        await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities()))
        client.initialized(types.InitializedParams())
        started = time.perf_counter()
        client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, text)))
        while 1 not in arrived:
            await asyncio.sleep(0.001)
        first = arrived[1] - started
        waits = []
        for version in range(2, changes + 2):
            sent = time.perf_counter()
            client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    types.VersionedTextDocumentIdentifier(version=version, uri=uri),
                    [types.TextDocumentContentChangeWholeDocument(text=f"{text}\n# edit {version}\n")],
                )
            )
            while version not in arrived:
                await asyncio.sleep(0.001)
            waits.append((arrived[version] - sent - DEBOUNCE_S) * 1000)
        await client.shutdown_async(None)
        client.exit(None)
    await client.stop()
    waits.sort()
    print(
        f"file: {text.count(chr(10)) + 1} lines, {counts[1]} diagnostics; server on one core: {bool(shutil.which('taskset'))}"
    )
    print(f"first open (server start-up and first analysis): {first * 1000:.0f} ms")
    print(
        f"change -> diagnostics, debounce ({DEBOUNCE_S * 1000:.0f} ms) excluded, {len(waits)} changes: "
        f"median {statistics.median(waits):.0f} ms, p95 {waits[int(0.95 * (len(waits) - 1))]:.0f} ms, "
        f"max {waits[-1]:.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--lines", type=int, default=1000)
    options = parser.parse_args()
    asyncio.run(measure(options.changes, options.lines))


if __name__ == "__main__":
    main()
