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

Diagnostics are published without building fixes (`api.lint_buffer`): the fixes of a version
are built when a code action is first asked for on it, and kept with it (`Known`), as is its
fix-all, which clients that resolve code actions get only when it is picked. Each version is
parsed from the previous one's tree (`analysis.reparse`), and the `Project` (callee files read
and their summaries) lives as long as the session, until a configuration file changes.
"""

from __future__ import annotations

import asyncio
import gc
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
from ..fixes.apply import FixedText, selected
from ..linting import GC_THRESHOLDS, SourceAnalysis
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
        self.results: dict[str, Known] = {}
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

    async def known(self, buffer: Buffer) -> Known:
        """What is known of the buffer's version: its analysis, computed once per version
        (code actions reuse it), without fixes until a code action asks for them."""
        known = self.results.get(buffer.key)
        if known is not None and known.version == buffer.version:
            return known
        async with self.lock:  # one analysis at a time: they share `project`
            settings = self.resolver.for_path(buffer.path)
            linted = await asyncio.to_thread(api.lint_buffer, buffer.text, buffer.path, settings, project=self.project)
        known = self.results[buffer.key] = Known(buffer.version, linted)
        return known

    async def with_fixes(self, known: Known) -> list[Finding]:
        """The version's findings with their fixes: built on the first code action, then kept."""
        async with self.lock:  # the fix builders share the index of the last module with analyses
            return await asyncio.to_thread(known.linted.with_fixes)

    async def publish(self, uri: str) -> None:
        buffer = self.buffer(uri)
        if buffer is None:
            return
        known = await self.known(buffer)
        current = self.buffer(uri)
        if current is None or current.version != buffer.version:
            return  # the editor moved on while this version was linted: its own run publishes
        by_uri: dict[str, list[types.Diagnostic]] = {shown: [] for shown in buffer.shown_in}
        for finding in known.linted.findings:
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
        known = await self.known(buffer)
        only = params.context.only
        wants_quick_fixes = only is None or types.CodeActionKind.QuickFix in only
        # A request the editor sends by itself as the cursor moves (VS Code's light bulb) shows
        # no source actions: it gets no fix-all, so that it builds fixes only for a finding there.
        automatic = params.context.trigger_kind == types.CodeActionTriggerKind.Automatic
        if only is None:
            wants_fix_all = not automatic
        else:
            wants_fix_all = any(convert.FIX_ALL.startswith(kind) for kind in only)
        touched = any(self._touches(finding, buffer, params) for finding in known.linted.findings)
        if not (wants_fix_all or (wants_quick_fixes and touched)):
            return []
        found = await self.with_fixes(known)
        actions: list[types.CodeAction] = []
        if wants_quick_fixes:
            for finding in found:
                if not self._touches(finding, buffer, params):
                    continue
                for action in (
                    convert.quick_fix(finding, buffer.locate, self.encode, self.unsafe_fixes),
                    convert.disable_for_line(finding, buffer.checked, buffer.locate, self.encode),
                ):
                    if action is not None:
                        actions.append(action)
        if wants_fix_all and any(selected(finding, unsafe=False) for finding in found):
            fix_all = types.CodeAction(title=f"Fix all safe {convert.SOURCE} findings", kind=convert.FIX_ALL)
            if self._resolves_edits():  # the edit is made when the user picks the action
                fix_all.data = {"uri": buffer.key, "version": buffer.version}
                actions.append(fix_all)
            else:
                fix_all.edit = await self._fix_all(buffer, known)
                if fix_all.edit is not None:
                    actions.append(fix_all)
        return actions

    async def resolve(self, action: types.CodeAction) -> types.CodeAction:
        """The edit of `source.fixAll.torchlint-inplace`, for the version it was offered for
        (an action for a version the editor has replaced is left without one)."""
        data = action.data if isinstance(action.data, dict) else {}
        buffer = self.buffer(str(data.get("uri", "")))
        offered_for = data.get("version")  # sent back as JSON: a notebook's tuple of versions, a list
        if buffer is None or json.loads(json.dumps(buffer.version)) != offered_for or action.kind != convert.FIX_ALL:
            return action
        action.edit = await self._fix_all(buffer, await self.known(buffer))
        return action

    def _resolves_edits(self) -> bool:
        """Whether the client fills a code action's edit in by `codeAction/resolve`."""
        text = self.client_capabilities.text_document
        asked = text.code_action if text is not None else None
        support = asked.resolve_support if asked is not None else None
        return bool(asked and asked.data_support and support and "edit" in support.properties)

    def _touches(self, finding: Finding, buffer: Buffer, params: types.CodeActionParams) -> bool:
        place = buffer.locate(finding.line)
        if place is None or place.uri != params.text_document.uri:
            return False
        last = buffer.locate(finding.span.end.line)
        end = last.line if last is not None else place.line
        return place.line <= params.range.end.line and params.range.start.line <= end

    async def _fix_all(self, buffer: Buffer, known: Known) -> types.WorkspaceEdit | None:
        """Every safe fix, as `--fix` applies them, as edits of the documents they change (a
        notebook's cells); computed once per version."""
        if known.fix_all is None:
            found = await self.with_fixes(known)
            async with self.lock:
                settings = self.resolver.for_path(buffer.path)
                known.fix_all = await asyncio.to_thread(
                    api.fix_source, buffer.text, buffer.path, settings, project=self.project, findings=found
                )
        fixed = known.fix_all
        if not fixed.applied:
            return None
        if buffer.shown_in == (buffer.key,):
            olds, news = [buffer.text], [fixed.text]
        else:  # a notebook: its JSON, each cell's source the text of one cell document
            olds, news = notebook.cell_sources(buffer.text), notebook.cell_sources(fixed.text)
        changes = {
            uri: [edit]
            for uri, old, new in zip(buffer.shown_in, olds, news, strict=True)
            if (edit := convert.replacement(uri, old, new, self.encode)) is not None
        }
        return types.WorkspaceEdit(changes=changes) if changes else None


@dataclass
class Known:
    """One version of a buffer: its analysis and, once asked for, its fix-all result."""

    version: Any
    linted: SourceAnalysis
    fix_all: FixedText | None = None


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
    types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, convert.FIX_ALL], resolve_provider=True),
)
async def code_action(params: types.CodeActionParams) -> list[types.CodeAction]:
    return await server.code_actions(params)


@server.feature(types.CODE_ACTION_RESOLVE)
async def code_action_resolve(params: types.CodeAction) -> types.CodeAction:
    return await server.resolve(params)


def run() -> None:
    gc.set_threshold(*GC_THRESHOLDS)  # as a run's checker does: the trees form no cycles worth walking
    server.start_io()
