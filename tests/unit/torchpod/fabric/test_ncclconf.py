"""NCCL's configuration files merged in NCCL's order (fabric/ncclconf.py), hostile files included."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchpod.fabric.ncclconf import CONF_CAP, files, merged, parse


def conf(root: Path, path: str, data: str | bytes) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data.encode() if isinstance(data, str) else data)


def test_the_order_is_nccl_conf_file_or_home_then_etc():
    assert files({"HOME": "/home/u"}) == ["/home/u/.nccl.conf", "/etc/nccl.conf"]
    assert files({"HOME": "/home/u", "NCCL_CONF_FILE": "/site/nccl.conf"}) == ["/site/nccl.conf", "/etc/nccl.conf"]
    assert files({"HOME": "/home/u", "NCCL_CONF_FILE": ""}) == ["/home/u/.nccl.conf", "/etc/nccl.conf"]
    assert files({}) == ["/etc/nccl.conf"]


def test_the_environment_wins_then_the_earlier_file(tmp_path):
    conf(tmp_path, "/home/u/.nccl.conf", "NCCL_DEBUG=INFO\nNCCL_IB_HCA=mlx5_0\n")
    conf(tmp_path, "/etc/nccl.conf", "NCCL_DEBUG=WARN\nNCCL_NET_PLUGIN=none\nNCCL_IB_HCA=mlx5_9\n")
    seen, notes = merged({"HOME": "/home/u", "NCCL_IB_HCA": "=mlx5_1"}, tmp_path)
    assert seen["NCCL_DEBUG"] == "INFO" and seen["NCCL_IB_HCA"] == "=mlx5_1" and seen["NCCL_NET_PLUGIN"] == "none"
    assert [n.code for n in notes] == ["ncclconf.file.read", "ncclconf.file.read"]
    assert "NCCL_IB_HCA already set" in notes[0].message


def test_the_line_format_is_setenvfiles():
    text = "# comment\nNCCL_DEBUG =INFO\r\nnoequals\n=value only\n=\nNCCL_X=a=b\nNCCL_E=\n"
    assert parse(text) == [("NCCL_DEBUG ", "INFO"), ("NCCL_X", "a=b"), ("NCCL_E", "")]
    assert parse("N" * 2000 + "=" + "v" * 2000) == [("N" * 1023, "v" * 1023)]


def test_a_missing_file_is_skipped_as_nccl_skips_it(tmp_path):
    seen, notes = merged({"NCCL_CONF_FILE": "/nowhere.conf"}, tmp_path)
    assert notes == [] and seen == {"NCCL_CONF_FILE": "/nowhere.conf"}


@pytest.mark.parametrize("make, needle", [
    (lambda p: os.mkfifo(p), "FIFO"),
    (lambda p: p.symlink_to("/dev/zero"), "character device"),
    (lambda p: p.write_bytes(b"NCCL_DEBUG=INFO\n\xff\xfe\x00binary"), "not UTF-8"),
    (lambda p: p.write_bytes(b"A" * (CONF_CAP + 1)), "cap"),
    (lambda p: p.mkdir(), "directory"),
])
def test_a_hostile_file_is_one_warning_never_a_hang(tmp_path, make, needle):
    (tmp_path / "etc").mkdir()
    make(tmp_path / "etc" / "nccl.conf")
    seen, notes = merged({"NCCL_DEBUG": "WARN"}, tmp_path)
    assert seen == {"NCCL_DEBUG": "WARN"}
    assert len(notes) == 1 and notes[0].severity.value == "warn" and needle in notes[0].message
    assert "\n" not in notes[0].message


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300))
def test_any_text_parses_to_names_without_newlines_or_equals(text):
    for name, value in parse(text):
        assert name and "=" not in name and "\n" not in name + value


def test_control_characters_in_names_are_escaped_in_the_note(tmp_path):
    conf(tmp_path, "/etc/nccl.conf", "NCCL_\x1b[2J=1\n")
    _, notes = merged({}, tmp_path)
    assert "\x1b" not in notes[0].message and "\\x1b" in notes[0].message
