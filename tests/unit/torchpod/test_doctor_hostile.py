"""torchpod.doctor, hostile: the text report quotes log lines without terminal control
characters."""

from __future__ import annotations

from hostile_reads import (
    doctor_log,
)


def test_the_text_report_quotes_log_lines_without_terminal_controls(tmp_path):
    path = tmp_path / "nccl.log"
    path.write_bytes(b"h:1:1 [0] NCCL INFO Using network IB \x1b[2J\x0bX\xc2\x85Y\n")
    code, out, err = doctor_log(path, tmp_path)
    assert code == 0 and not err
    shown = next(line for line in out.splitlines() if line.startswith("  > "))
    assert shown == "  > h:1:1 [0] NCCL INFO Using network IB \\x1b[2J\\x0bX\\x85Y"
