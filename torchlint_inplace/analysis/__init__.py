"""The shared analysis: one pass per file that every rule reads."""

from __future__ import annotations

import libcst as cst

from .model import FileAnalysis, Form, Mutation


def analyze(module: cst.Module, path: str) -> FileAnalysis:
    return FileAnalysis(path=path, module=module)


__all__ = ["FileAnalysis", "Form", "Mutation", "analyze"]
