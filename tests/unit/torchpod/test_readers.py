"""The launcher's one bounded reader (torchpod.readers): regular files only, a cap per kind
of file, strict UTF-8, every OSError one line; logs streamed with a per-line cap."""

from __future__ import annotations

import os
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchpod import readers
from torchpod.errors import InputError

EXPECTED = "a test file"


def read(path, cap=readers.NODE_FILE_CAP):
    return readers.read_text(path, what=f"F={str(path)!r}", expected=EXPECTED, cap=cap)


def one_line(exc: pytest.ExceptionInfo) -> str:
    message = str(exc.value)
    assert "\n" not in message and message.startswith("F=")
    return message


def test_a_regular_file_is_read_whole(tmp_path):
    (tmp_path / "f").write_text("node1\nnode2\n")
    assert read(tmp_path / "f") == "node1\nnode2\n"
    (tmp_path / "link").symlink_to(tmp_path / "f")  # sysfs is links: the final target counts
    assert read(tmp_path / "link") == "node1\nnode2\n"


@pytest.mark.parametrize("make, kind", [
    (lambda p: os.mkfifo(p), "is a FIFO (named pipe)"),
    (lambda p: p.mkdir(), "is a directory"),
    (lambda p: p.symlink_to("/dev/zero"), "is a character device"),
    (lambda p: p.symlink_to("/dev/null"), "is a character device"),
])
def test_anything_but_a_regular_file_is_one_line_naming_what_it_is(tmp_path, make, kind):
    path = tmp_path / "f"
    make(path)
    with pytest.raises(InputError) as info:
        read(path)
    assert kind in one_line(info) and repr(str(path)) in str(info.value)


def test_a_sparse_gigabyte_is_refused_from_its_size(tmp_path):
    path = tmp_path / "big"
    with open(path, "wb") as f:
        f.truncate(1 << 30)  # `truncate -s 1G`: no block is written, nothing may be read
    with pytest.raises(InputError) as info:
        read(path)
    assert "is 1073741824 bytes, over the 16 MiB cap" in one_line(info)


def test_a_file_that_reports_a_small_size_is_still_cut_at_the_cap(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"a" * 100)
    assert read(path, cap=100) == "a" * 100
    path.write_bytes(b"a" * 101)
    with pytest.raises(InputError, match="over the 100 bytes cap"):
        read(path, cap=100)
    # procfs reports a size of 0 whatever it holds: the read itself stops at the cap
    assert len(readers.read_bytes("/proc/self/status", what="F", expected=EXPECTED, cap=1 << 16)) > 0
    with pytest.raises(InputError, match="holds more than 16 bytes"):
        readers.read_bytes("/proc/self/status", what="F", expected=EXPECTED, cap=16)


def test_undecodable_bytes_are_one_line_naming_the_offset(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"node1\n\xff\xfe\x00binary")
    with pytest.raises(InputError) as info:
        read(path)
    assert "not UTF-8 text (first at byte 6)" in one_line(info)


@pytest.mark.parametrize("name, reason", [
    ("missing", "No such file or directory"),
    ("x" * 300, "File name too long"),
    ("file/below", "Not a directory"),
])
def test_every_oserror_is_one_line_with_the_systems_reason(tmp_path, name, reason):
    (tmp_path / "file").write_text("")
    with pytest.raises(readers.Unreadable) as info:
        read(tmp_path / name)
    assert f"cannot be read ({reason})" in one_line(info) and info.value.errno


def test_a_nul_in_the_path_is_one_line():
    with pytest.raises(InputError) as info:
        read("a\0b")
    assert "is not a usable path" in one_line(info)


def head(path, limit):
    return readers.read_head(path, what=f"F={str(path)!r}", expected=EXPECTED, limit=limit)


def tail(path, chars):
    return readers.tail_text(path, what=f"F={str(path)!r}", expected=EXPECTED, chars=chars)


def test_a_head_is_the_first_bytes_of_a_file_of_any_size(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    assert head(path, 4) == b"0123" and head(path, 10) == b"0123456789" and head(path, 99) == b"0123456789"
    with open(path, "wb") as f:
        f.truncate(1 << 30)  # a sparse gigabyte: its start is read, nothing more
    assert head(path, 3) == b"\0\0\0"
    assert head("/proc/self/status", 5) == b"Name:"  # procfs's size of 0 does not stop it


def test_a_tail_is_the_last_characters_of_a_file_of_any_size(tmp_path):
    path = tmp_path / "log"
    path.write_text("first\nsecond\nthé end\n")
    assert tail(path, 8) == "thé end\n" and tail(path, 999) == "first\nsecond\nthé end\n" and tail(path, 0) == ""
    with open(path, "wb") as f:
        f.truncate(1 << 30)  # a sparse gigabyte with a last line: only its end is read
        f.seek(0, os.SEEK_END)
        f.write(b"last line\n")
    tracemalloc.start()
    try:
        assert tail(path, 10) == "last line\n"
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, peak
    assert "VmRSS" in tail("/proc/self/status", 4096)  # procfs reports a size of 0: read to its end


def test_a_tail_of_bytes_is_the_last_bytes_whatever_they_are(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"\xff\x00abc")
    read = lambda n: readers.read_tail(path, what="F", expected=EXPECTED, limit=n)  # noqa: E731
    assert read(2) == b"bc" and read(5) == b"\xff\x00abc" and read(99) == b"\xff\x00abc" and read(0) == b""


def test_a_tail_replaces_undecodable_bytes_and_a_split_character(tmp_path):
    path = tmp_path / "log"
    path.write_bytes("€€€".encode())  # 9 bytes; 2 characters keep the last 8: the cut splits the first "€"
    assert tail(path, 2) == "€€"
    path.write_bytes(b"\xff\xfe binary \xe2\x82\xac\n")
    assert tail(path, 100) == "\ufffd\ufffd binary €\n"


@pytest.mark.parametrize("make, kind", [
    (lambda p: os.mkfifo(p), "is a FIFO (named pipe)"),
    (lambda p: p.mkdir(), "is a directory"),
    (lambda p: p.symlink_to("/dev/zero"), "is a character device"),
])
@pytest.mark.parametrize("reading", [lambda p: head(p, 10), lambda p: tail(p, 10),
                                     lambda p: readers.read_tail(p, what=f"F={str(p)!r}", expected=EXPECTED, limit=9)],
                         ids=["head", "tail", "tail-bytes"])
def test_a_head_or_tail_refuses_what_is_not_a_regular_file_before_reading(tmp_path, make, kind, reading):
    path = tmp_path / "f"
    make(path)
    with pytest.raises(InputError) as info:
        reading(path)
    assert kind in one_line(info)
    with pytest.raises(readers.Unreadable, match="No such file or directory"):
        reading(tmp_path / "missing")


def lines_of(path, cap=8):
    reader = readers.Lines(path, what="F", expected=EXPECTED, line_cap=cap)
    return list(reader), reader.truncated


def test_lines_are_streamed_and_long_ones_cut_at_the_cap(tmp_path):
    path = tmp_path / "log"
    path.write_bytes(b"short\r\n" + b"x" * 20 + b"\nnext\n\xffok\nlast")
    assert lines_of(path) == (["short", "x" * 8, "next", "\ufffdok", "last"], 1)
    path.write_bytes(b"")
    assert lines_of(path) == ([], 0)


def test_lines_refuse_what_is_not_a_regular_file_before_reading(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    for path, kind in ((tmp_path / "fifo", "FIFO"), ("/dev/zero", "character device"), (tmp_path, "directory")):
        with pytest.raises(InputError, match=kind):
            readers.Lines(path, what="F", expected=EXPECTED)


def test_one_huge_line_and_a_long_log_take_memory_bounded_by_the_chunk_and_cap(tmp_path):
    line = b"h1:7:30 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA\n"
    path = tmp_path / "log"
    with open(path, "wb") as f:
        f.write(b" " * (24 << 20))  # one 24 MiB line of spaces, then an ordinary log
        f.write(b"\n" + line * ((24 << 20) // len(line)))
    tracemalloc.start()
    try:
        count = sum(1 for _ in readers.Lines(path, what="F", expected=EXPECTED))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 1 + (24 << 20) // len(line)
    assert peak < 12 << 20, peak  # a 48 MiB file: never held whole, nor its long line


@settings(deadline=None, max_examples=150)
@given(st.lists(st.binary(max_size=40), max_size=12), st.integers(1, 16), st.sampled_from([b"\n", b"\r\n"]),
       st.integers(1, 64))
def test_lines_are_the_file_split_on_newlines_and_cut_at_the_cap(tmp_path_factory, pieces, cap, eol, chunk):
    """Whatever the bytes, and wherever the reads split them (chunk)."""
    path = tmp_path_factory.mktemp("lines") / "log"
    data = eol.join(p.replace(b"\n", b"") for p in pieces)
    path.write_bytes(data)
    reader = readers.Lines(path, what="F", expected=EXPECTED, line_cap=cap, chunk=chunk)
    got = list(reader)
    want = data.split(b"\n")
    if want and want[-1] == b"":
        want.pop()
    assert got == [w[:cap].rstrip(b"\r").decode("utf-8", "replace") for w in want]
    assert reader.truncated == sum(len(w) > cap for w in want)
