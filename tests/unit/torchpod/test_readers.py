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
