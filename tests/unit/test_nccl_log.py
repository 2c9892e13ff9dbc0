"""Which transport an NCCL_DEBUG=INFO log proves (torchpod.nccl_log), per verdict and version."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from torchpod.nccl_log import TRANSPORTS, analyze

LOGS = yaml.safe_load((Path(__file__).parent / "fixtures" / "nccl_logs.yaml").read_text())


@pytest.mark.parametrize("name", list(LOGS))
def test_verdict_and_evidence(name):
    case = LOGS[name]
    verdict = analyze(case["log"])
    assert verdict is not None and verdict.transport in TRANSPORTS
    assert verdict.transport == case["expect"]["transport"], verdict
    assert verdict.gdrdma == case["expect"]["gdrdma"], verdict
    if "nccl_version" in case["expect"]:
        assert verdict.nccl_version == case["expect"]["nccl_version"]
    assert all(line in case["log"] for line in verdict.evidence)  # quoted as written
    assert verdict.evidence or verdict.transport == "unknown"
    if case.get("evidence_contains"):
        assert any(case["evidence_contains"] in line for line in verdict.evidence), verdict.evidence
    if case.get("notes_contain"):
        assert any(case["notes_contain"] in n for n in verdict.notes), verdict.notes


def test_a_log_without_nccl_lines_has_no_verdict():
    assert analyze("Traceback (most recent call last):\n  ...\n") is None
