"""torchpod.nccl_log, hostile: NCCL logs that are broken, named with 300 characters, hold over-
long lines or any pieces: a doctor report or exactly one line naming the file."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostile_reads import (
    RDMA_LOG,
    SETTINGS,
    doctor_log,
    ends_well,
)


@pytest.mark.parametrize("make, needle", [
    (lambda p: p.symlink_to("/dev/zero"), "is a character device"),
    (lambda p: os.mkfifo(p), "is a FIFO (named pipe)"),
    (lambda p: p.mkdir(), "is a directory"),
    (lambda p: None, "cannot be read (No such file or directory)"),
    (lambda p: p.write_bytes(bytes(range(256)) * 64), "holds no NCCL lines"),
    (lambda p: p.write_bytes(b" " * 200_000), "holds no NCCL lines"),
])
def test_a_hostile_nccl_log_is_one_line_naming_it(tmp_path, make, needle):
    path = tmp_path / "nccl.log"
    make(path)
    line = ends_well(doctor_log(path, tmp_path))
    assert line is not None and f"--nccl-log={str(path)!r}" in line and needle in line, line


def test_a_300_character_log_name_is_one_line(tmp_path):
    line = ends_well(doctor_log(tmp_path / ("x" * 300), tmp_path))
    assert line is not None and "File name too long" in line


@pytest.mark.parametrize("long_line", [
    "h:1:1 [0] NCCL INFO Using network " + " " * 200_000 + "x",  # 93 s before: a lazy group and \s*$
    "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 2[0] [send] via NET/" + "IB" * 100_000,
    "h:1:1 [0] NCCL INFO NET/IB : Using " + "[0]mlx5_0:1/IB " * 20_000,
    "[1,0]<stdout>:" * 15_000 + "h:1:1 [0] NCCL INFO Ring 00 : 1 -> 0 [receive] via NET/Socket/0",
    "h:1:1 [0] NCCL INFO Ring 00 : " + "1[" * 100_000,
], ids=["using-network-then-spaces", "channel-without-its-end", "devices-repeated", "launcher-prefix-repeated",
        "ring-open-brackets"])
def test_an_over_long_line_is_cut_and_the_verdict_still_comes(tmp_path, long_line):
    path = tmp_path / "nccl.log"
    path.write_text(long_line + "\n" + RDMA_LOG)
    code, out, err = doctor_log(path, tmp_path, "--format", "json")
    assert not err and code == 0, err
    got = json.loads(out)
    assert got["transport"] == "ib-gdrdma" and any("over-long lines" in n for n in got["log_notes"])


@SETTINGS
@given(st.lists(st.one_of(
    st.sampled_from(RDMA_LOG.splitlines() + ["x NCCL INFO Using network Socket", "x NCCL INFO NCCL version 2.21.5",
                                             "x NCCL WARN NET/OFI Selected provider is efa",
                                             "x NCCL INFO Using network ", "NCCL version 2.4.8+cuda10.0",
                                             "[1,7]<stdout>:x NCCL INFO Ring 00 : 7 -> 8 [send] via NET/OFI/0",
                                             "x NCCL INFO Using network IBext_v8 [repeated 15x across cluster]",
                                             "x NCCL INFO NET/IB : No device found.",
                                             "x NCCL INFO NET/Socket : Using"]),
    st.text(max_size=60), st.binary(max_size=60).map(lambda b: b.decode("latin-1"))), max_size=8),
    st.sampled_from(["\n", "\r\n", "\r", "\x85", "\u2028"]), st.binary(max_size=40))
def test_any_nccl_log_ends_with_a_report_or_one_line(pieces, eol, junk):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "nccl.log").write_bytes(eol.join(pieces).encode("utf-8", "surrogatepass") + junk)
        ends_well(doctor_log(root / "nccl.log", root), report_codes=(0,))
        ends_well(doctor_log(root / "nccl.log", root, "--format", "json"), report_codes=(0,))


def test_the_doctor_names_the_plugin_network_of_a_real_sharp_log(tmp_path):
    """NVIDIA/nccl#1814's channels (tests/unit/fixtures/nccl_logs_real.yaml): ib through IBext_v8."""
    import yaml

    from paths import UNIT_FIXTURES

    case = yaml.safe_load((UNIT_FIXTURES / "nccl_logs_real.yaml").read_text())["nccl_1814_ibext_v8_channels"]
    path = tmp_path / "nccl.log"
    path.write_text(case["log"])
    code, out, err = doctor_log(path, tmp_path, "--format", "json")
    got = json.loads(out)
    assert (got["transport"], got["network"]) == ("ib", "IBext_v8") and not err
    code, out, err = doctor_log(path, tmp_path)
    assert "transport: ib, network IBext_v8" in out and "nccl-rdma-sharp-plugins" in out, out
