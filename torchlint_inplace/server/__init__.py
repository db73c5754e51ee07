"""`torchlint-inplace server`: a Language Server Protocol server over stdio (the `lsp` extra).

`convert` turns findings into what LSP sends (diagnostics, edits, code actions); `app` is the
server: which documents are open, when to lint them, what to answer. Both lint through `api`,
as the command does, so an editor sees what `torchlint-inplace` prints.
"""
