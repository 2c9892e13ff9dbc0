"""bench/rebuild.py's reading of its earlier results (--edit-only): through the bounded reader,
a file that is not such a JSON is one line, never a wait."""

from __future__ import annotations

import os

import pytest

from paths import ROOT, bench_script


@pytest.fixture(scope="module")
def rebuild():
    return bench_script("rebuild")


def test_the_results_written_are_read_back(rebuild):
    assert "arches" in rebuild.read_results(ROOT / "bench" / "results" / "rebuild.json")


@pytest.mark.parametrize("make, says", [
    (os.mkfifo, "is a FIFO (named pipe)"),
    (lambda p: p.write_bytes(b'{"\xff": 1}'), "not UTF-8 text (first at byte 2)"),
    (lambda p: p.write_bytes(b" " * ((1 << 20) + 1)), "over the 1 MiB cap"),
    (lambda p: None, "cannot be read (No such file or directory)"),
])
def test_results_that_are_no_results_file_are_one_line(rebuild, tmp_path, make, says):
    make(tmp_path / "rebuild.json")
    with pytest.raises(SystemExit) as info:
        rebuild.read_results(tmp_path / "rebuild.json")
    assert str(info.value).startswith(f"bench/rebuild.py: {tmp_path / 'rebuild.json'} ") and says in str(info.value)
