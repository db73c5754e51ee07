"""Reading a file into text the way Python itself would: a UTF-8 BOM or a PEP 263 coding
cookie picks the encoding, and anything that keeps us from getting text becomes a
`NotReadable` with a message fit to show the user (`linting` turns it into a TIP000 finding).

The text is not newline-translated, so positions and later fixes refer to the file as it is;
`encoding`, `bom` and `newline` say how to write it back unchanged. A Jupyter notebook's text
is the joined code of its cells (`notebook.py`), and `notebook` is what writes it back.
"""

from __future__ import annotations

import io
import os
import re
import stat
import tokenize
from dataclasses import dataclass
from pathlib import Path, PurePath

from . import notebook as notebooks

MAX_BYTES = 10 * 1024 * 1024

_FIRST_NEWLINE = re.compile(r"\r\n|\r|\n")
_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class SourceFile:
    text: str
    encoding: str = "utf-8"  # the codec that decoded it (without the BOM)
    bom: bool = False
    newline: str = "\n"  # the first line ending in the file: what an edit should insert
    notebook: notebooks.Notebook | None = None  # for a notebook: its document, `text` being its joined cells


class NotReadable(Exception):
    """Why a file yields no text; `line` points at the offending byte when there is one."""

    def __init__(self, message: str, line: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def decode(data: bytes, path: str | PurePath = "") -> SourceFile:
    """The text of a file's bytes; a notebook's (by the suffix of `path`) is its joined cells."""
    if notebooks.is_notebook(path):
        return _notebook(data)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as error:
        if not error.msg.startswith("invalid or missing encoding declaration"):
            raise NotReadable(f"invalid encoding declaration: {error.msg}", error.lineno or 1) from None
        encoding = "utf-8"  # no cookie and a first line that is not UTF-8: say where below
    bom = data.startswith(_BOM)
    body = data[len(_BOM) :] if bom else data
    codec = "utf-8" if encoding == "utf-8-sig" else encoding
    try:
        text = body.decode(codec)
    except UnicodeDecodeError as error:
        line = body[: error.start].count(b"\n") + 1
        byte = body[error.start : error.start + 1].hex()
        hint = "; declare the encoding with a `# -*- coding: ... -*-` line or save the file as UTF-8"
        raise NotReadable(
            f"not valid {codec} (byte 0x{byte} on line {line}){hint if codec == 'utf-8' else ''}", line
        ) from None
    newline = _FIRST_NEWLINE.search(text)
    return SourceFile(text=text, encoding=codec, bom=bom, newline=newline.group() if newline else "\n")


def read(path: Path | str) -> SourceFile:
    try:
        status = os.stat(path)
        if stat.S_ISDIR(status.st_mode):
            raise NotReadable("is a directory, not a file")
        if not stat.S_ISREG(status.st_mode):
            raise NotReadable("not a regular file (a pipe or device would block or never end); not checked")
        size = status.st_size
        if size > MAX_BYTES:
            raise NotReadable(
                f"file is {size / 2**20:.1f} MB, larger than the {MAX_BYTES // 2**20} MB limit; not checked"
            )
        with open(path, "rb") as file:
            data = file.read(MAX_BYTES + 1)
    except PermissionError:
        raise NotReadable("cannot read file: permission denied") from None
    except FileNotFoundError:
        raise NotReadable("no such file or directory") from None
    except OSError as error:
        raise NotReadable(f"cannot read file: {error.strerror or error}") from None
    if len(data) > MAX_BYTES:  # grew since stat, or a special file without a size
        raise NotReadable(f"file is larger than the {MAX_BYTES // 2**20} MB limit; not checked")
    return decode(data, path)


def _notebook(data: bytes) -> SourceFile:
    """JSON is UTF-8 (RFC 8259), with or without a BOM."""
    bom = data.startswith(_BOM)
    try:
        text = data[len(_BOM) if bom else 0 :].decode("utf-8")
    except UnicodeDecodeError as error:
        raise NotReadable(
            f"not a notebook: not valid UTF-8 (byte 0x{data[error.start : error.start + 1].hex()})"
        ) from None
    try:
        parsed = notebooks.Notebook.parse(text)
    except notebooks.NotANotebook as error:
        raise NotReadable(str(error)) from None
    return SourceFile(text=parsed.source, bom=bom, notebook=parsed)
