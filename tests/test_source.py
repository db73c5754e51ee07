"""Reading files robustly: encodings, BOM, newlines, and every way a file can fail to be checked."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fakes import fake_rules  # noqa: F401 - a fixture
from support import check_file

from torchlint_inplace import source
from torchlint_inplace.api import lint_paths
from torchlint_inplace.config import Settings

pytestmark = pytest.mark.usefixtures("fake_rules")  # the engine under test, not the analysis

SETTINGS = Settings(root="/", select=("TIP001", "TIP003"))


def only_finding(path: Path) -> tuple[str, int, str]:
    (finding,) = check_file(path, SETTINGS).findings
    return finding.code, finding.line, finding.message


def test_utf8_without_cookie() -> None:
    decoded = source.decode("name = 'ü'\n".encode())
    assert decoded == source.SourceFile(text="name = 'ü'\n", encoding="utf-8", bom=False, newline="\n")


def test_bom_is_stripped_and_remembered() -> None:
    decoded = source.decode(b"\xef\xbb\xbfx = 1\r\n")
    assert decoded.text == "x = 1\r\n" and decoded.bom and decoded.newline == "\r\n"


def test_coding_cookie_is_honoured() -> None:
    data = "# -*- coding: latin-1 -*-\nname = 'é'\n".encode("latin-1")
    decoded = source.decode(data)
    assert decoded.text.endswith("name = 'é'\n") and decoded.encoding == "iso-8859-1"


def test_newline_style_is_the_first_line_ending() -> None:
    assert source.decode(b"a = 1\rb = 2\n").newline == "\r"
    assert source.decode(b"a = 1").newline == "\n"


def test_non_utf8_without_cookie_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "latin.py"
    path.write_bytes(b"x = 1\ny = 2\nname = '\xe9'\n")
    code, line, message = only_finding(path)
    assert (code, line) == ("TIP000", 3)
    assert message.startswith("not valid utf-8 (byte 0xe9 on line 3); declare the encoding")


def test_non_utf8_first_line_without_cookie(tmp_path: Path) -> None:
    path = tmp_path / "latin.py"
    path.write_bytes(b"name = '\xe9'\n")
    assert only_finding(path)[2].startswith("not valid utf-8 (byte 0xe9 on line 1)")


def test_bytes_that_contradict_the_cookie(tmp_path: Path) -> None:
    path = tmp_path / "wrong.py"
    path.write_bytes(b"# coding: ascii\nname = '\xc3\xa9'\n")
    assert only_finding(path)[:2] == ("TIP000", 2)
    assert "not valid ascii" in only_finding(path)[2]


def test_unknown_encoding_in_cookie(tmp_path: Path) -> None:
    path = tmp_path / "bad_cookie.py"
    path.write_bytes(b"# coding: klingon\nx = 1\n")
    assert only_finding(path)[2] == "invalid encoding declaration: unknown encoding: klingon"


def test_empty_file_is_clean(tmp_path: Path) -> None:
    path = tmp_path / "empty.py"
    path.write_bytes(b"")
    assert check_file(path, SETTINGS).findings == ()


def test_huge_file_is_skipped_with_a_message(tmp_path: Path) -> None:
    path = tmp_path / "huge.py"
    with path.open("wb") as file:
        file.truncate(source.MAX_BYTES + 1)  # sparse: no 10 MB written
    code, _, message = only_finding(path)
    assert code == "TIP000" and message == "file is 10.0 MB, larger than the 10 MB limit; not checked"


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file_really_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "secret.py"
    path.write_text("x = 1\n")
    path.chmod(0)
    try:
        assert only_finding(path)[2] == "cannot read file: permission denied"
    finally:
        path.chmod(0o600)


def test_unreadable_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "secret.py"
    path.write_text("x = 1\n")

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(source, "open", refuse, raising=False)
    assert only_finding(path) == ("TIP000", 1, "cannot read file: permission denied")


def test_directory_and_fifo_are_not_read(tmp_path: Path) -> None:
    with pytest.raises(source.NotReadable, match="is a directory, not a file"):
        source.read(tmp_path)  # a named directory is walked: only a race gets one here
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "pipe.py"
        os.mkfifo(fifo)
        assert only_finding(fifo)[2].startswith("not a regular file")


def test_syntax_error_is_placed_where_python_places_it(tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text("x = 1\ny = (1,\n")
    finding = check_file(path, SETTINGS).findings[0]
    assert (finding.code, finding.line, finding.span.start.column) == ("TIP000", 2, 4)
    assert finding.message == "syntax error: '(' was never closed"


def test_one_bad_file_does_not_stop_the_others(tmp_path: Path) -> None:
    files = {"a_bad.py": b"def f(:\n", "b_latin.py": b"x = '\xff'\n", "c_empty.py": b"", "d_ok.py": b"mutate(1)\n"}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    results = lint_paths([tmp_path / name for name in files], SETTINGS).files
    assert [[f.code for f in result.findings] for result in results] == [["TIP000"], ["TIP000"], [], ["TIP001"]]
    assert [result.text for result in results] == ["def f(:\n", None, None, "mutate(1)\n"]  # kept for frames only


def test_crlf_and_bom_sources_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "windows.py"
    path.write_bytes(b"\xef\xbb\xbfx = 1\r\nmutate(x)\r\n")
    assert [(f.code, f.line, f.span.start.column) for f in check_file(path, SETTINGS).findings] == [("TIP001", 2, 0)]
