"""Which transport an NCCL_DEBUG=INFO log proves (torchpod.nccl_log), per verdict and version."""

from __future__ import annotations

import re

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


REAL = yaml.safe_load((UNIT_FIXTURES / "nccl_logs_real.yaml").read_text())
_SOURCE = re.compile(r"https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/issues/[0-9]+")


@pytest.mark.parametrize("name", list(REAL))
def test_the_verdict_a_public_thread_established(name):
    """Logs people posted (tests/unit/fixtures/nccl_logs_real.yaml): the verdict the thread
    established, the NCCL version the excerpt prints, and evidence quoted as written."""
    case = REAL[name]
    assert _SOURCE.fullmatch(case["source"]), case["source"]
    verdict = analyze(case["log"])
    assert verdict is not None
    assert (verdict.transport, verdict.gdrdma) == (case["expect"]["transport"], case["expect"]["gdrdma"]), verdict
    assert verdict.nccl_version == case["nccl"], verdict
    if "network" in case["expect"]:
        assert verdict.network == case["expect"]["network"], verdict
    assert verdict.evidence and all(line in case["log"].splitlines() for line in verdict.evidence)
    assert analyze(iter(case["log"].splitlines())) == verdict


def test_the_real_corpus_spans_the_classes_the_issue_names():
    """Issue 21: >= 20 logs; >= 3 SHARP/IBext, >= 4 before 2.18, >= 3 EFA, >= 2 socket
    fallbacks, >= 2 interleaved, and launcher-prefixed lines."""
    count = {cls: sum(cls in case["classes"] for case in REAL.values())
             for cls in ("sharp", "pre-2.18", "efa", "socket", "interleaved", "prefixed")}
    assert len(REAL) >= 20 and len({case["source"] for case in REAL.values()}) == len(REAL)
    assert count["sharp"] >= 3 and count["pre-2.18"] >= 4 and count["efa"] >= 3, count
    assert count["socket"] >= 2 and count["interleaved"] >= 2 and count["prefixed"] >= 3, count


@pytest.mark.parametrize("prefix", ["[rank3]:", "3: ", "[default3]:", "[1,3]<stdout>:", "node-1: ",
                                    "(RayTrainWorker pid=9, ip=10.0.0.2) ", "  | 2024-12-04T05:27:39.073Z | "])
def test_a_launcher_prefix_changes_nothing(prefix):
    log = "".join(f"{prefix}{line}\n" for line in LOGS["seed_roce_gdrdma"]["log"].splitlines())
    assert analyze(log).transport == "ib-gdrdma"


@pytest.mark.parametrize("network, transport", [("IBext", "ib"), ("IBext_v10", "ib"), ("IB", "ib"),
                                                ("GPUDirectTCPX", "unknown"), ("IBextra", "unknown")])
def test_a_net_plugin_is_named(network, transport):
    verdict = analyze(f"h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/{network}/0\n")
    assert (verdict.transport, verdict.network) == (transport, network)
    assert verdict.notes if network != "IB" else not verdict.notes


def test_many_ranks_interleaved_the_weakest_path_decides():
    ranks = [f"n{r // 8}:{r}:{r} [{r % 8}] NCCL INFO Channel 00/0 : {r}[{r % 8}] -> {r + 8}[{r % 8}] [send] "
             f"via NET/IBext_v8/{r % 8}/GDRDMA" for r in range(4096)]
    ranks.insert(2048, "n9:1:1 [0] NCCL INFO Ring 00 : 9 -> 10 [send] via NET/Socket/0")
    verdict = analyze("\n".join(ranks))
    assert verdict.transport == "socket" and "channels took different paths" in verdict.notes[0]


@pytest.mark.parametrize("line", [
    "[1,0]<stdout>:" * 15_000 + "h:1:1 [0] NCCL INFO Using network IB",
    "h:1:1 [0] NCCL INFO Ring 00 : " + "1[" * 100_000,
    "h:1:1 [0] NCCL INFO Channel 00 : 0[0] -> " * 5_000,
    "h:1:1 [0] NCCL INFO Using network IBext" + " [" * 100_000,
    "NCCL version " + "2." * 100_000,
], ids=["long-prefix", "ring-open-brackets", "channel-repeated", "using-then-brackets", "version-dots"])
def test_the_old_formats_stay_linear(line):
    import time

    start = time.process_time()
    analyze(line + "\nh:1:1 [0] NCCL INFO Using network IB\n")
    assert time.process_time() - start < 30  # a hang guard, not a figure


# A one-rank NCCL 2.28.9 job on an H200 with no RDMA NIC (bench/gpu_check.py's allreduce
# step; bench/results/gpu-check-nvidia-h200/nccl/), its first lines less the 64 channel lines.
ONE_NODE_H200 = """\
vm:802:802 [0] NCCL INFO Bootstrap: Using eth0:192.0.2.2<0>
vm:802:802 [0] NCCL INFO NCCL version 2.28.9+cuda13.0
vm:802:802 [0] NCCL INFO NET/IB : No device found.
vm:802:802 [0] NCCL INFO NET/Socket : Using [0]eth0:192.0.2.2<0>
vm:802:802 [0] NCCL INFO Assigned NET plugin Socket to comm
vm:802:802 [0] NCCL INFO Using network Socket
vm:802:802 [0] NCCL INFO comm 0x22b22840 rank 0 nRanks 1 nNodes 1 localRanks 1 localRank 0 MNNVL 0
vm:802:802 [0] NCCL INFO Channel 00/64 : 0
"""


def test_a_log_whose_communicators_span_one_node_says_its_network_carried_nothing():
    verdict = analyze(ONE_NODE_H200)
    assert (verdict.transport, verdict.nodes, verdict.nccl_version) == ("socket", 1, "2.28.9")
    assert any("spans one node (nNodes 1)" in n for n in verdict.notes), verdict.notes


def test_one_communicator_across_nodes_is_the_log_s_node_count():
    two = ONE_NODE_H200 + "vm:9:9 [0] NCCL INFO comm 0x5 rank 3 nRanks 16 nNodes 2 localRanks 8 localRank 3 MNNVL 0\n"
    verdict = analyze(two)
    assert verdict.nodes == 2 and not any("spans one node" in n for n in verdict.notes)
    assert analyze("h:1:1 [0] NCCL INFO Using network Socket\n").nodes is None  # no comm line: not known


@pytest.mark.parametrize("line", [
    "h:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 1 nNodes 99999999999999999999 localRanks 1",
    "h:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 1 nNodes -1 localRanks 1",
    "h:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 1 nNodes one localRanks 1",
], ids=["huge", "negative", "word"])
def test_a_malformed_node_count_is_not_read(line):
    assert analyze(line + "\nh:1:1 [0] NCCL INFO Using network Socket\n").nodes is None
