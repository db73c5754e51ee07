"""`torchlint-inplace server`, end to end: a real LSP client (pytest-lsp) drives the server over
stdio as an editor would, and every answer is checked against what `api` says of the text."""

from __future__ import annotations

import asyncio
import json
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

from torchlint_inplace import api, notebook, ruledoc  # noqa: E402
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
async def plain_client(lsp_client: LanguageClient, tmp_path: Path):
    """A client that cannot fill a code action's edit in by `codeAction/resolve`."""
    capabilities = client_capabilities("visual-studio-code")
    assert capabilities.text_document is not None and capabilities.text_document.code_action is not None
    capabilities.text_document.code_action.resolve_support = None
    lsp_client.feature(types.CLIENT_REGISTER_CAPABILITY)(lambda params: None)
    await lsp_client.initialize_session(types.InitializeParams(capabilities=capabilities))
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


def change(client: LanguageClient, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


def apply(text: str, edits: list[types.TextEdit]) -> str:
    """Applies LSP edits (ASCII text, so UTF-16 columns are code points)."""
    lines = text.splitlines(keepends=True)

    def offset(position: types.Position) -> int:
        return sum(len(line) for line in lines[: position.line]) + position.character

    for edit in sorted(edits, key=lambda edit: offset(edit.range.start), reverse=True):
        text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end) :]
    return text


async def actions_at(
    client: LanguageClient,
    uri: str,
    diagnostic: types.Diagnostic,
    only: list[str] | None = None,
    trigger: types.CodeActionTriggerKind | None = None,
    where: types.Range | None = None,
) -> list[types.CodeAction]:
    answer = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri),
            range=where or diagnostic.range,
            context=types.CodeActionContext(diagnostics=[diagnostic], only=only, trigger_kind=trigger),
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
    assert diagnostic.code_description is not None
    assert (
        diagnostic.code_description.href
        == ruledoc.url("TIP002")
        == "https://pypi.org/project/torchlint-inplace/#tip002"
    )
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
    (offered,) = await actions_at(client, uri, diagnostic, only=[FIX_ALL])
    assert offered.kind == FIX_ALL and offered.edit is None  # VS Code resolves it when it is picked
    fix_all = await client.code_action_resolve_async(offered)
    assert fix_all.edit is not None and fix_all.edit.changes is not None
    assert apply(HAZARD, list(fix_all.edit.changes[uri])) == api.fix_source(HAZARD, path).text


async def test_fix_all_comes_with_its_edit_for_a_client_that_cannot_resolve(
    plain_client: LanguageClient, tmp_path: Path
) -> None:
    path = tmp_path / "model.py"
    uri = open_document(plain_client, path, HAZARD)
    (diagnostic,) = await diagnostics_for(plain_client, uri)
    (fix_all,) = await actions_at(plain_client, uri, diagnostic, only=[FIX_ALL])
    assert fix_all.edit is not None and fix_all.edit.changes is not None
    assert apply(HAZARD, list(fix_all.edit.changes[uri])) == api.fix_source(HAZARD, path).text


async def test_fix_all_offered_for_a_replaced_version_resolves_to_nothing(
    client: LanguageClient, tmp_path: Path
) -> None:
    uri = open_document(client, tmp_path / "model.py", HAZARD)
    (diagnostic,) = await diagnostics_for(client, uri)
    (offered,) = await actions_at(client, uri, diagnostic, only=[FIX_ALL])
    change(client, uri, 2, HAZARD + "\n")
    assert (await client.code_action_resolve_async(offered)).edit is None


async def test_a_request_the_editor_sends_by_itself_gets_no_fix_all(client: LanguageClient, tmp_path: Path) -> None:
    uri = open_document(client, tmp_path / "model.py", HAZARD)
    (diagnostic,) = await diagnostics_for(client, uri)
    elsewhere = types.Range(types.Position(0, 0), types.Position(0, 0))  # `import torch`: no finding there
    kinds = {}
    for trigger in (types.CodeActionTriggerKind.Automatic, types.CodeActionTriggerKind.Invoked):
        actions = await actions_at(client, uri, diagnostic, trigger=trigger, where=elsewhere)
        kinds[trigger] = [action.kind for action in actions]
    assert kinds == {types.CodeActionTriggerKind.Automatic: [], types.CodeActionTriggerKind.Invoked: [FIX_ALL]}


async def test_no_fix_all_is_offered_without_a_safe_fix(client: LanguageClient, tmp_path: Path) -> None:
    uri = open_document(client, tmp_path / "model.py", UNSAFE_ONLY)
    (diagnostic,) = await diagnostics_for(client, uri)
    assert await actions_at(client, uri, diagnostic, only=[FIX_ALL]) == []


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
        change(client, uri, version, text)
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


def open_notebook(client: LanguageClient, path: Path, cells: list[tuple[types.NotebookCellKind, str]]) -> list[str]:
    """Opens a notebook document of `cells` (kind, text); returns the cells' uris."""
    notebook_uri = uris.from_fs_path(str(path)) or ""
    documents = [f"{notebook_uri}#cell{number}" for number in range(len(cells))]
    client.notebook_document_did_open(
        types.DidOpenNotebookDocumentParams(
            notebook_document=types.NotebookDocument(
                uri=notebook_uri,
                notebook_type="jupyter-notebook",
                version=1,
                cells=[
                    types.NotebookCell(kind, document) for (kind, _), document in zip(cells, documents, strict=True)
                ],
            ),
            cell_text_documents=[
                types.TextDocumentItem(uri=document, language_id="python", version=1, text=text)
                for (_, text), document in zip(cells, documents, strict=True)
            ],
        )
    )
    return documents


def fixed_cells(path: Path, cells: list[tuple[types.NotebookCellKind, str]]) -> list[str]:
    """What `--fix` makes of each cell of the notebook, through `api` on its JSON."""
    document = {
        "cells": [
            {"cell_type": "code" if kind is CODE else "markdown", "metadata": {}, "source": text}
            for kind, text in cells
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return notebook.cell_sources(api.fix_source(json.dumps(document), path).text)


CODE, MARKUP = types.NotebookCellKind.Code, types.NotebookCellKind.Markup
HEAD, TAIL = HAZARD.split("\n\n\n")
# A markdown cell, the imports, and a hazard in each of two later cells.
NOTEBOOK = [(MARKUP, "# A model"), (CODE, "%matplotlib inline\n" + HEAD), (CODE, TAIL), (CODE, TAIL.replace("A", "B"))]


async def test_a_notebook_document_is_linted_across_its_cells(client: LanguageClient, tmp_path: Path) -> None:
    cells = open_notebook(client, tmp_path / "nb.ipynb", NOTEBOOK[:3])
    (diagnostic,) = await diagnostics_for(client, cells[2])
    assert TAIL.splitlines()[diagnostic.range.start.line].strip() == "y[0] = 0.0"
    assert await diagnostics_for(client, cells[1]) == []
    (related,) = diagnostic.related_information or []
    assert related.location.uri == cells[2]


async def test_a_quick_fix_in_a_notebook_edits_the_cell_it_lies_in(client: LanguageClient, tmp_path: Path) -> None:
    path = tmp_path / "nb.ipynb"
    cells = open_notebook(client, path, NOTEBOOK)
    (diagnostic,) = await diagnostics_for(client, cells[3])
    (fix,) = [action for action in await actions_at(client, cells[3], diagnostic) if "(safe," in action.title]
    assert fix.edit is not None and fix.edit.changes is not None and list(fix.edit.changes) == [cells[3]]
    fixed = apply(NOTEBOOK[3][1], list(fix.edit.changes[cells[3]]))
    assert fixed == fixed_cells(path, NOTEBOOK)[3] != NOTEBOOK[3][1]


async def test_fix_all_in_a_notebook_edits_each_cell_as_fix_does(client: LanguageClient, tmp_path: Path) -> None:
    path = tmp_path / "nb.ipynb"
    cells = open_notebook(client, path, NOTEBOOK)
    (diagnostic,) = await diagnostics_for(client, cells[2])
    (offered,) = await actions_at(client, cells[2], diagnostic, only=[FIX_ALL])
    fix_all = await client.code_action_resolve_async(offered)
    assert fix_all.edit is not None and fix_all.edit.changes is not None
    assert sorted(fix_all.edit.changes) == [cells[2], cells[3]]  # the markdown and the imports stay
    expected = fixed_cells(path, NOTEBOOK)
    for number in (2, 3):
        assert apply(NOTEBOOK[number][1], list(fix_all.edit.changes[cells[number]])) == expected[number]
        assert expected[number] != NOTEBOOK[number][1]
