"""`torchlint-inplace server`, end to end: a real LSP client (pytest-lsp) drives the server over
stdio as an editor would, and every answer is checked against what `api` says of the text."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest_lsp = pytest.importorskip("pytest_lsp")
from lsprotocol import types  # noqa: E402
from pygls import uris  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402
from support import SIGMOID_HAZARD  # noqa: E402

from torchlint_inplace import api  # noqa: E402
from torchlint_inplace.server.convert import FIX_ALL  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.asyncio]

HAZARD = SIGMOID_HAZARD
# `y += 1` is rewritten as `y = y + 1` only as an unsafe fix: `h` still reads the old tensor.
UNSAFE_ONLY = HAZARD.replace(
    "        y[0] = 0.0\n        return y\n", "        h = y\n        y += 1\n        return h * y\n"
)


SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "torchlint_inplace", "server"])


async def start(client: LanguageClient, root: Path, options: dict[str, Any] | None = None) -> None:
    """An editor's session: it accepts the server's request to watch `pyproject.toml` files."""
    client.feature(types.CLIENT_REGISTER_CAPABILITY)(lambda params: None)
    await client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            root_uri=uris.from_fs_path(str(root)),
            initialization_options=options,
        )
    )


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient, tmp_path: Path):
    await start(lsp_client, tmp_path)
    yield lsp_client
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=SERVER)
async def unsafe_client(lsp_client: LanguageClient, tmp_path: Path):
    await start(lsp_client, tmp_path, {"unsafeFixes": True})
    yield lsp_client
    await lsp_client.shutdown_session()


async def diagnostics_for(
    client: LanguageClient, uri: str, until: Callable[[list[types.Diagnostic]], bool] = lambda _: True
) -> list[types.Diagnostic]:
    """The diagnostics the server publishes for `uri`, once they satisfy `until`."""
    for _ in range(200):
        if uri in client.diagnostics and until(list(client.diagnostics[uri])):
            return list(client.diagnostics[uri])
        await asyncio.sleep(0.05)
    raise AssertionError(f"no diagnostics for {uri} that satisfy the test; last: {client.diagnostics.get(uri)}")


def open_document(client: LanguageClient, path: Path, text: str) -> str:
    uri = uris.from_fs_path(str(path))
    assert uri is not None
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))
    )
    return uri


def apply(text: str, edits: list[types.TextEdit]) -> str:
    """Applies LSP edits (ASCII text, so UTF-16 columns are code points)."""
    lines = text.splitlines(keepends=True)

    def offset(position: types.Position) -> int:
        return sum(len(line) for line in lines[: position.line]) + position.character

    for edit in sorted(edits, key=lambda edit: offset(edit.range.start), reverse=True):
        text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end) :]
    return text


async def actions_at(
    client: LanguageClient, uri: str, diagnostic: types.Diagnostic, only: list[str] | None = None
) -> list[types.CodeAction]:
    answer = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri),
            range=diagnostic.range,
            context=types.CodeActionContext(diagnostics=[diagnostic], only=only),
        )
    )
    return [action for action in answer or [] if isinstance(action, types.CodeAction)]


async def test_a_hazard_is_published_where_the_api_places_it(client: LanguageClient, tmp_path: Path) -> None:
    path = tmp_path / "model.py"
    uri = open_document(client, path, HAZARD)
    (diagnostic,) = await diagnostics_for(client, uri)
    (finding,) = api.lint_source(HAZARD, path)
    start, end = finding.span.start, finding.span.end
    assert diagnostic.range == types.Range(
        types.Position(start.line - 1, start.column), types.Position(end.line - 1, end.column)
    )
    assert (diagnostic.code, diagnostic.severity) == (finding.code, types.DiagnosticSeverity.Error)
    assert diagnostic.code_description is not None and diagnostic.code_description.href.startswith("https://")
    (related,) = diagnostic.related_information or []
    assert related.location.uri == uri
    assert related.location.range.start.line == finding.related[0].span.start.line - 1


async def test_the_quick_fix_edits_the_text_into_what_the_fixer_makes(client: LanguageClient, tmp_path: Path) -> None:
    path = tmp_path / "model.py"
    uri = open_document(client, path, HAZARD)
    (diagnostic,) = await diagnostics_for(client, uri)
    (fix,) = [action for action in await actions_at(client, uri, diagnostic) if "(safe," in action.title]
    assert fix.kind == types.CodeActionKind.QuickFix and fix.edit is not None and fix.edit.changes is not None
    fixed = apply(HAZARD, list(fix.edit.changes[uri]))
    assert fixed == api.fix_source(HAZARD, path).text != HAZARD
    assert api.lint_source(fixed, path) == []


async def test_disable_for_this_line_adds_a_noqa_comment(client: LanguageClient, tmp_path: Path) -> None:
    path = tmp_path / "model.py"
    uri = open_document(client, path, HAZARD)
    (diagnostic,) = await diagnostics_for(client, uri)
    (disable,) = [action for action in await actions_at(client, uri, diagnostic) if action.title.startswith("Disable")]
    assert disable.edit is not None and disable.edit.changes is not None
    silenced = apply(HAZARD, list(disable.edit.changes[uri]))
    assert silenced.splitlines()[diagnostic.range.start.line].endswith(f"# noqa: {diagnostic.code}")
    assert api.lint_source(silenced, path) == []


async def test_fix_all_applies_the_safe_fixes(client: LanguageClient, tmp_path: Path) -> None:
    path = tmp_path / "model.py"
    uri = open_document(client, path, HAZARD)
    (diagnostic,) = await diagnostics_for(client, uri)
    (fix_all,) = await actions_at(client, uri, diagnostic, only=[FIX_ALL])
    assert fix_all.kind == FIX_ALL and fix_all.edit is not None and fix_all.edit.changes is not None
    assert apply(HAZARD, list(fix_all.edit.changes[uri])) == api.fix_source(HAZARD, path).text


async def test_unsafe_fixes_are_offered_only_when_the_client_asks(
    client: LanguageClient, unsafe_client: LanguageClient, tmp_path: Path
) -> None:
    offered = []
    for each in (client, unsafe_client):
        uri = open_document(each, tmp_path / "model.py", UNSAFE_ONLY)
        (diagnostic,) = await diagnostics_for(each, uri)
        offered.append([action.title for action in await actions_at(each, uri, diagnostic) if "unsafe" in action.title])
    assert offered[0] == [] and len(offered[1]) == 1


async def test_changes_are_debounced_and_stale_versions_dropped(client: LanguageClient, tmp_path: Path) -> None:
    uri = open_document(client, tmp_path / "model.py", HAZARD)
    await diagnostics_for(client, uri, bool)
    published: list[types.PublishDiagnosticsParams] = []
    handlers = client.protocol.fm.features
    keep = handlers[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS]
    handlers[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = lambda params: (published.append(params), keep(params))
    fixed = api.fix_source(HAZARD, tmp_path / "model.py").text
    for version, text in ((2, fixed), (3, HAZARD), (4, fixed)):
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )
    for _ in range(100):
        if published:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)
    assert [(params.version, list(params.diagnostics)) for params in published] == [(4, [])]


async def test_close_clears_the_diagnostics(client: LanguageClient, tmp_path: Path) -> None:
    uri = open_document(client, tmp_path / "model.py", HAZARD)
    await diagnostics_for(client, uri, bool)
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    assert await diagnostics_for(client, uri, lambda found: not found) == []


async def test_a_changed_pyproject_is_read_again(client: LanguageClient, tmp_path: Path) -> None:
    uri = open_document(client, tmp_path / "model.py", HAZARD)
    await diagnostics_for(client, uri, bool)
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text("[tool.torchlint-inplace]\nignore = ['TIP002']\n", encoding="utf-8")
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[types.FileEvent(uri=uris.from_fs_path(str(pyproject)) or "", type=types.FileChangeType.Created)]
        )
    )
    assert await diagnostics_for(client, uri, lambda found: not found) == []


async def test_a_notebook_document_is_linted_across_its_cells(client: LanguageClient, tmp_path: Path) -> None:
    notebook_uri = uris.from_fs_path(str(tmp_path / "nb.ipynb")) or ""
    head, tail = HAZARD.split("\n\n\n")
    texts = ["# A model", "%matplotlib inline\n" + head, tail]
    kinds = [types.NotebookCellKind.Markup, types.NotebookCellKind.Code, types.NotebookCellKind.Code]
    cells = [f"{notebook_uri}#cell{number}" for number in range(len(texts))]
    client.notebook_document_did_open(
        types.DidOpenNotebookDocumentParams(
            notebook_document=types.NotebookDocument(
                uri=notebook_uri,
                notebook_type="jupyter-notebook",
                version=1,
                cells=[types.NotebookCell(kind=kind, document=cell) for kind, cell in zip(kinds, cells, strict=True)],
            ),
            cell_text_documents=[
                types.TextDocumentItem(uri=cell, language_id="python", version=1, text=text)
                for cell, text in zip(cells, texts, strict=True)
            ],
        )
    )
    (diagnostic,) = await diagnostics_for(client, cells[2])
    assert tail.splitlines()[diagnostic.range.start.line].strip() == "y[0] = 0.0"
    assert await diagnostics_for(client, cells[1]) == []
    (related,) = diagnostic.related_information or []
    assert related.location.uri == cells[2]
