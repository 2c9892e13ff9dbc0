"""Which transport an NCCL_DEBUG=INFO log proves (torchpod.nccl_log), per verdict and version."""

from __future__ import annotations

import pytest
import yaml

from torchpod.nccl_log import TRANSPORTS, analyze

from paths import UNIT_FIXTURES

LOGS = yaml.safe_load((UNIT_FIXTURES / "nccl_logs.yaml").read_text())


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


def test_streamed_lines_give_the_verdict_the_text_gives():
    for case in LOGS.values():
        assert analyze(iter(case["log"].splitlines())) == analyze(case["log"])


@pytest.mark.parametrize("line", [
    "h:1:1 [0] NCCL INFO Using network " + " " * 200_000 + "x",  # 93 s before: a lazy group, then \s*$
    "h:1:1 [0] NCCL INFO Assigned NET plugin " + " \t" * 100_000 + " to com",
    "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 2[0] [send] via NET/" + "IB" * 100_000,
    "h:1:1 [0] NCCL INFO NET/Plugin " + ":" * 200_000,
], ids=["using-then-spaces", "assigned-then-whitespace", "channel-without-end", "plugin-colons"])
def test_a_long_line_is_cut_at_the_cap_and_said(line):
    """Every pattern is linear and each line capped: no line costs more than its cap."""
    import time

    from torchpod.nccl_log import LINE_CAP

    start = time.process_time()
    verdict = analyze(line + "\nh:1:1 [0] NCCL INFO Using network IB\n")
    assert verdict.transport == "ib" and any(f"first {LINE_CAP} bytes" in n for n in verdict.notes)
    # a hang guard, not a figure: the quadratic pattern took minutes on the first line alone
    assert time.process_time() - start < 30


def test_the_using_line_names_the_network_without_its_suffix():
    for text, network in (("Using network AWS Libfabric", "libfabric"), ("Assigned NET plugin IB to comm", "ib"),
                          ("Using network Socket  ", "socket"),
                          ("Assigned NET plugin Libfabric to comm \r", "libfabric")):
        verdict = analyze(f"h:1:1 [0] NCCL INFO {text}\n")
        assert verdict.transport == network, (text, verdict)
