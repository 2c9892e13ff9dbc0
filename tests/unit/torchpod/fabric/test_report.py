"""torchpod.fabric.report: a detector's report; the plan's notes are its findings' messages,
in order (the doctor reads the findings' codes instead)."""

from __future__ import annotations

from torchpod.fabric.findings import info, ok, user
from torchpod.fabric.report import FabricReport


def test_notes_are_the_findings_messages_in_order():
    findings = (info("roce.found", "RoCE: 2 ports"), user("roce.user.gid-index-not-v2", "your index"),
                ok("roce.gid.chosen", "NCCL_IB_GID_INDEX=3"))
    report = FabricReport("roce", (("NCCL_IB_GID_INDEX", "3"),), findings)
    assert report.notes == ("RoCE: 2 ports", "your index", "NCCL_IB_GID_INDEX=3")
    assert FabricReport().notes == () and FabricReport().fabric is None
