"""bench/localise.py's input: the preflight bench's results, read through the bounded reader;
a file that is not such a JSON is one line, never a wait."""

from __future__ import annotations

import os

import pytest

from paths import bench_script


@pytest.fixture(scope="module")
def localise():
    return bench_script("localise")


@pytest.mark.parametrize("make, says", [
    (os.mkfifo, "is a FIFO (named pipe)"),
    (lambda p: os.symlink("/dev/zero", p), "is a character device"),
    (lambda p: p.write_bytes(b'{"x": "\xff"}'), "not UTF-8 text (first at byte 7)"),
    (lambda p: p.write_bytes(b" " * ((1 << 20) + 1)), "over the 1 MiB cap"),
    (lambda p: p.write_text("{"), "Expecting property name"),
])
def test_results_that_are_no_results_file_are_one_line(localise, tmp_path, capsys, make, says):
    make(tmp_path / "preflight.json")
    with pytest.raises(SystemExit) as info:
        localise.main(["--results", str(tmp_path / "preflight.json"), "--out", str(tmp_path / "out.json")])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.startswith("bench/localise.py: ") and says in err and err.count("\n") == 1
    assert not (tmp_path / "out.json").exists()
