"""torchpod.schedulers.pbs, hostile: PBS_NODEFILE with one line per slot, broken files, names
that match twice, non-ASCII node indices and any bytes: a plan or exactly one line naming
the file, through ``cli.main``."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostile_reads import (
    CONTENT,
    SETTINGS,
    ends_well,
    error_of,
    main,
    pbs_env,
    plan,
    sane_plan,
)


def test_a_nodefile_with_one_line_per_slot_plans(tmp_path):
    (tmp_path / "nodes").write_text("n1.cluster\nn1.cluster\nn2.cluster # comment\n\n")
    got = plan(pbs_env(tmp_path, tmp_path / "nodes"), tmp_path)
    assert (got["nnodes"], got["node_rank"], got["rdzv_endpoint"]) == ("2", 0, "n1.cluster:29400")


@pytest.mark.parametrize("make, needle", [
    (lambda p: os.mkfifo(p), "is a FIFO (named pipe)"),
    (lambda p: p.symlink_to("/dev/zero"), "is a character device"),
    (lambda p: p.mkdir(), "is a directory"),
    (lambda p: None, "cannot be read (No such file or directory)"),
    (lambda p: p.write_bytes(b"\x7fELF\x02\x01\x01\x00\xff\xfe"), "not UTF-8 text (first at byte 8)"),
    (lambda p: p.write_bytes(b"n1\n" * ((16 << 20) // 3 + 1)), "over the 16 MiB cap"),
    (lambda p: os.truncate(p.write_bytes(b"") or p, 1 << 30), "is 1073741824 bytes, over the 16 MiB cap"),
    (lambda p: p.write_text("n1\n$(touch P);x\n"), "line 2 has host '$(touch'"),
    (lambda p: p.write_text("n1\nn\u00e9\n"), "line 2 has host 'n\u00e9'"),
])
def test_a_hostile_nodefile_is_one_line_naming_it(tmp_path, make, needle):
    path = tmp_path / "nodes"
    make(path)
    line = error_of(["plan"], pbs_env(tmp_path, path), tmp_path)
    assert f"PBS_NODEFILE={str(path)!r}" in line and needle in line, line


def test_two_hosts_with_one_short_name_are_refused_naming_both(tmp_path):
    (tmp_path / "nodes").write_text("n1.a.example\nn1.b.example\n")
    line = error_of(["plan"], pbs_env(tmp_path, tmp_path / "nodes"), tmp_path)
    assert "this host 'n1' matches 'n1.a.example' and 'n1.b.example'" in line and "TORCHPOD_HOSTNAME" in line
    # the full name is exact: no ambiguity, each node its own index
    got = plan(pbs_env(tmp_path, tmp_path / "nodes", TORCHPOD_HOSTNAME="n1.b.example"), tmp_path)
    assert got["node_rank"] == 1
    # one host spelt twice is two lines for one node: refused too, never node 0 twice
    (tmp_path / "nodes").write_text("N1\nn1\n")
    assert "matches 'N1' and 'n1'" in error_of(["plan"], pbs_env(tmp_path, tmp_path / "nodes"), tmp_path)
    # PBS_NODENUM, set per node by the MoM, decides where the name cannot
    (tmp_path / "nodes").write_text("n1.a.example\nn1.b.example\n")
    assert plan(pbs_env(tmp_path, tmp_path / "nodes", PBS_NODENUM="1"), tmp_path)["node_rank"] == 1


@pytest.mark.parametrize("value", ["\u00b2", "\u0663", "0x1", "9" * 5000])
def test_a_node_index_of_non_ascii_digits_is_one_line(tmp_path, value):
    (tmp_path / "nodes").write_text("n0\nn1\nn2\nn3\n")
    line = error_of(["plan"], pbs_env(tmp_path, tmp_path / "nodes", PBS_NODENUM=value), tmp_path)
    assert "PBS_NODENUM=" in line and "expected an integer" in line


@SETTINGS
@given(CONTENT, st.booleans())
def test_any_bytes_in_a_nodefile_end_with_a_plan_or_one_line(data, first):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "nodes").write_bytes(data + b"\nn1\n" if first else b"n1\n" + data)
        result = main(["plan"], pbs_env(root, root / "nodes"), root)
        if ends_well(result) is None:
            sane_plan(result[1], "pbs")
