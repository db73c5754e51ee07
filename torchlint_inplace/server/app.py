"""The language server: lints open documents through `api` and answers with diagnostics and
code actions, on pygls.

A document is linted when it opens, when it is saved, and a short while after it changes
(`DEBOUNCE_S`: typing does not start an analysis per keystroke); a result computed for a
version the editor has since replaced is dropped. Closing a document clears its diagnostics.
Settings come from the `pyproject.toml` above each document, as for the command, and are read
again when the client reports that a watched `pyproject.toml` changed. A notebook (LSP 3.17
notebook documents) is linted as the command lints an `.ipynb`: its code cells as one module,
each diagnostic published on the cell it lies in. Clients may send `{"unsafeFixes": true}` as
initialization options or in `workspace/didChangeConfiguration` under `torchlint-inplace` to be
offered unsafe fixes too.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lsprotocol import types
from pygls import uris
from pygls.lsp.server import LanguageServer

from .. import __version__, analysis, api, config, notebook
from ..diagnostics import Finding
from . import convert

DEBOUNCE_S = 0.15
CONFIG_FILES = "**/pyproject.toml"
SETTINGS_SECTION = "torchlint-inplace"


@dataclass(frozen=True)
class Buffer:
    """An open document as `api` takes it: a text document, or a notebook as its JSON."""

    key: str  # the text document's uri, or the notebook's
    path: str
    text: str  # what `api.lint_source` takes: the source, or a notebook's JSON
    checked: str  # what the findings are positioned in (`api.checked_text`)
    version: Any
    shown_in: tuple[str, ...]  # the documents diagnostics are published to (a notebook: its cells)

    def locate(self, line: int) -> convert.Place | None:
        if self.shown_in == (self.key,):
            return convert.Place(self.key, line - 1)
        where = notebook.cell_index(self.checked).locate(line)
        return None if where is None else convert.Place(self.shown_in[where[0] - 1], where[1] - 1)


class Server(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "torchlint-inplace",
            __version__,
            notebook_document_sync=types.NotebookDocumentSyncOptions(
                notebook_selector=[
                    types.NotebookDocumentFilterWithCells(
                        cells=[types.NotebookCellLanguage(language="python")], notebook="jupyter-notebook"
                    )
                ]
            ),
        )
        self.resolver = config.Resolver()
        self.project = analysis.Project()
        self.unsafe_fixes = False
        self.pending: dict[str, asyncio.Task[None]] = {}
        self.results: dict[str, tuple[Any, list[Finding]]] = {}
        self.lock = asyncio.Lock()

    # ------------------------------------------------------------------------- documents

    def buffer(self, uri: str) -> Buffer | None:
        """The open document `uri` is, or is a cell of."""
        book = self.workspace.get_notebook_document(notebook_uri=uri) or self.workspace.get_notebook_document(
            cell_uri=uri
        )
        if book is not None:
            return self._notebook(book)
        document = self.workspace.text_documents.get(uri)
        if document is None:
            return None
        path = uris.to_fs_path(uri) or uri
        return Buffer(uri, path, document.source, document.source, document.version, (uri,))

    def _notebook(self, book: types.NotebookDocument) -> Buffer:
        cells = [(cell, self.workspace.get_text_document(cell.document).source) for cell in book.cells]
        data = {
            "cells": [
                {
                    "cell_type": "code" if cell.kind is types.NotebookCellKind.Code else "markdown",
                    "metadata": {},
                    "source": text,
                }
                for cell, text in cells
            ],
            "metadata": {},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
        text = json.dumps(data)
        path = uris.to_fs_path(book.uri) or book.uri
        try:
            checked = api.checked_text(text, path)
        except notebook.NotANotebook:
            checked = ""
        versions = (book.version, *(self.workspace.get_text_document(cell.document).version for cell, _ in cells))
        return Buffer(book.uri, path, text, checked, versions, tuple(cell.document for cell, _ in cells))

    def encode(self, uri: str, line: int, column: int) -> types.Position:
        lines = self.workspace.get_text_document(uri).lines
        return self.workspace.position_codec.position_to_client_units(lines, types.Position(line, column))

    def uri_of(self, path: str) -> str:
        return uris.from_fs_path(os.path.abspath(path)) or path

    # ------------------------------------------------------------------------- linting

    async def findings(self, buffer: Buffer) -> list[Finding]:
        """The buffer's findings, computed once per version (code actions reuse them)."""
        known = self.results.get(buffer.key)
        if known is not None and known[0] == buffer.version:
            return known[1]
        async with self.lock:  # one analysis at a time: they share `project`
            settings = self.resolver.for_path(buffer.path)
            found = await asyncio.to_thread(api.lint_source, buffer.text, buffer.path, settings, project=self.project)
        self.results[buffer.key] = (buffer.version, found)
        return found

    async def publish(self, uri: str) -> None:
        buffer = self.buffer(uri)
        if buffer is None:
            return
        found = await self.findings(buffer)
        current = self.buffer(uri)
        if current is None or current.version != buffer.version:
            return  # the editor moved on while this version was linted: its own run publishes
        by_uri: dict[str, list[types.Diagnostic]] = {shown: [] for shown in buffer.shown_in}
        for finding in found:
            made = convert.diagnostic(finding, buffer.locate, self.encode, self.uri_of)
            if made is not None and made[0] in by_uri:
                by_uri[made[0]].append(made[1])
        for shown, diagnostics in by_uri.items():
            version = self.workspace.get_text_document(shown).version
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=shown, diagnostics=diagnostics, version=version)
            )

    def schedule(self, uri: str, delay: float) -> None:
        """Lints `uri` after `delay` seconds, replacing a run scheduled earlier and not begun."""
        earlier = self.pending.pop(uri, None)
        if earlier is not None:
            earlier.cancel()

        async def later() -> None:
            await asyncio.sleep(delay)
            self.pending.pop(uri, None)
            await self.publish(uri)

        self.pending[uri] = asyncio.ensure_future(later())

    def clear(self, uri: str, shown_in: Sequence[str]) -> None:
        task = self.pending.pop(uri, None)
        if task is not None:
            task.cancel()
        self.results.pop(uri, None)
        for shown in shown_in:
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=shown, diagnostics=[]))

    def reload(self) -> None:
        """A configuration file changed: settings and callee summaries are read again."""
        self.resolver = config.Resolver()
        self.project = analysis.Project()
        self.results.clear()
        for uri in [*self.workspace.text_documents, *self.workspace.notebook_documents]:
            if self.workspace.get_notebook_document(cell_uri=uri) is None:
                self.schedule(uri, 0)

    # ------------------------------------------------------------------------- code actions

    async def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        buffer = self.buffer(params.text_document.uri)
        if buffer is None:
            return []
        found = await self.findings(buffer)
        only = params.context.only
        actions: list[types.CodeAction] = []
        if only is None or types.CodeActionKind.QuickFix in only:
            for finding in found:
                if not self._touches(finding, buffer, params):
                    continue
                for action in (
                    convert.quick_fix(finding, buffer.locate, self.encode, self.unsafe_fixes),
                    convert.disable_for_line(finding, buffer.checked, buffer.locate, self.encode),
                ):
                    if action is not None:
                        actions.append(action)
        wants_fix_all = only is None or any(convert.FIX_ALL.startswith(kind) for kind in only)
        if wants_fix_all and buffer.shown_in == (buffer.key,):
            fix_all = await self._fix_all(buffer)
            if fix_all is not None:
                actions.append(fix_all)
        return actions

    def _touches(self, finding: Finding, buffer: Buffer, params: types.CodeActionParams) -> bool:
        place = buffer.locate(finding.line)
        if place is None or place.uri != params.text_document.uri:
            return False
        last = buffer.locate(finding.span.end.line)
        end = last.line if last is not None else place.line
        return place.line <= params.range.end.line and params.range.start.line <= end

    async def _fix_all(self, buffer: Buffer) -> types.CodeAction | None:
        """`source.fixAll.torchlint-inplace`: every safe fix, as `--fix` applies them."""
        async with self.lock:
            settings = self.resolver.for_path(buffer.path)
            fixed = await asyncio.to_thread(api.fix_source, buffer.text, buffer.path, settings, project=self.project)
        if not fixed.applied:
            return None
        lines = self.workspace.get_text_document(buffer.key).lines
        whole = types.Range(types.Position(0, 0), types.Position(len(lines), 0))
        return types.CodeAction(
            title=f"Fix all safe {convert.SOURCE} findings",
            kind=convert.FIX_ALL,
            edit=types.WorkspaceEdit(changes={buffer.key: [types.TextEdit(whole, fixed.text)]}),
        )


server = Server()


@server.feature(types.INITIALIZE)
def initialize(params: types.InitializeParams) -> None:
    options = params.initialization_options
    if isinstance(options, dict):
        server.unsafe_fixes = bool(options.get("unsafeFixes", False))


@server.feature(types.INITIALIZED)
async def initialized(params: types.InitializedParams) -> None:
    """Asks the client to report changes of configuration files, where it can."""
    watched = server.client_capabilities.workspace
    if watched and watched.did_change_watched_files and watched.did_change_watched_files.dynamic_registration:
        options = types.DidChangeWatchedFilesRegistrationOptions(
            watchers=[types.FileSystemWatcher(glob_pattern=CONFIG_FILES)]
        )
        registration = types.Registration(
            id="torchlint-inplace-config", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES, register_options=options
        )
        try:
            await server.client_register_capability_async(types.RegistrationParams(registrations=[registration]))
        except Exception as error:  # the client refused: it may still send the notification unasked
            server.window_log_message(types.LogMessageParams(types.MessageType.Warning, f"watching: {error}"))


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
def did_change_configuration(params: types.DidChangeConfigurationParams) -> None:
    settings = params.settings.get(SETTINGS_SECTION) if isinstance(params.settings, dict) else None
    if isinstance(settings, dict):
        server.unsafe_fixes = bool(settings.get("unsafeFixes", False))


@server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
def did_change_watched_files(params: types.DidChangeWatchedFilesParams) -> None:
    server.reload()


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
async def did_open(params: types.DidOpenTextDocumentParams) -> None:
    await server.publish(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(params: types.DidChangeTextDocumentParams) -> None:
    server.schedule(params.text_document.uri, DEBOUNCE_S)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
async def did_save(params: types.DidSaveTextDocumentParams) -> None:
    await server.publish(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(params: types.DidCloseTextDocumentParams) -> None:
    server.clear(params.text_document.uri, [params.text_document.uri])


@server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
async def notebook_did_open(params: types.DidOpenNotebookDocumentParams) -> None:
    await server.publish(params.notebook_document.uri)


@server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
def notebook_did_change(params: types.DidChangeNotebookDocumentParams) -> None:
    server.schedule(params.notebook_document.uri, DEBOUNCE_S)


@server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
async def notebook_did_save(params: types.DidSaveNotebookDocumentParams) -> None:
    await server.publish(params.notebook_document.uri)


@server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
def notebook_did_close(params: types.DidCloseNotebookDocumentParams) -> None:
    server.clear(params.notebook_document.uri, [cell.uri for cell in params.cell_text_documents])


@server.feature(
    types.TEXT_DOCUMENT_CODE_ACTION,
    types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, convert.FIX_ALL]),
)
async def code_action(params: types.CodeActionParams) -> list[types.CodeAction]:
    return await server.code_actions(params)


def run() -> None:
    server.start_io()
