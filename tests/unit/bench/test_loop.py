"""bench/loop.py's reading: a stamped log and the results so far, through the bounded reader;
a file that is neither is one line, never a wait."""

from __future__ import annotations

import os

import pytest

from paths import ROOT, bench_script


@pytest.fixture(scope="module")
def loop():
    return bench_script("loop")


def test_a_stamped_log_is_its_lines_with_any_bytes_replaced(loop, tmp_path):
    log = tmp_path / "run.log"
    log.write_bytes(b"1.5 ==> setup\n2.0 caf\xff\n3.0 EXIT 0\n")
    assert loop.read_log(log) == ["1.5 ==> setup", "2.0 caf\ufffd", "3.0 EXIT 0"]
    assert loop.stamped(loop.read_log(log))[-1] == (3.0, "EXIT 0")
    log.write_bytes(b"")
    assert loop.read_log(log) == [""]


def _huge(path):
    with open(path, "wb") as f:
        f.truncate((256 << 20) + 1)  # sparse: one byte past the cap, refused from its size


@pytest.mark.parametrize("make, says", [
    (os.mkfifo, "is a FIFO (named pipe)"),
    (lambda p: os.symlink("/dev/zero", p), "is a character device"),
    (os.mkdir, "is a directory"),
    (_huge, "over the 256 MiB cap"),
    (lambda p: None, "cannot be read (No such file or directory)"),
])
def test_a_log_that_is_no_log_file_is_one_line(loop, tmp_path, make, says):
    make(tmp_path / "run.log")
    with pytest.raises(SystemExit) as info:
        loop.read_log(tmp_path / "run.log")
    message = str(info.value)
    assert message.startswith(f"bench/loop.py: --log={str(tmp_path / 'run.log')!r} ") and says in message
    assert "\n" not in message


def test_the_results_so_far_are_read_bounded_and_none_is_empty(loop, tmp_path):
    assert loop.read_results(tmp_path / "loop.json") == {}
    (tmp_path / "loop.json").write_text('{"first": {}}')
    assert loop.read_results(tmp_path / "loop.json") == {"first": {}}
    assert loop.read_results() == loop.read_results(ROOT / "bench" / "results" / "loop.json")
    for make, says in ((lambda p: p.write_bytes(b'{"\xff": 1}'), "not UTF-8 text (first at byte 2)"),
                       (lambda p: p.write_text("{"), "Expecting property name"),
                       (lambda p: (p.unlink(), os.mkfifo(p)), "is a FIFO (named pipe)")):
        make(tmp_path / "loop.json")
        with pytest.raises(SystemExit, match=r"^bench/loop.py: .*" + says.replace("(", r"\(").replace(")", r"\)")):
            loop.read_results(tmp_path / "loop.json")
