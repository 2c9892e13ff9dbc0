"""`torchpod run -m torchpod.preflight` on containers as nodes, links throttled from the host
(tc on the container's eth0, entered with nsenter: iproute2 on the host, nothing added to the
image): every throttled node is named and no other, whether it is one node of four (the
rendezvous host or another), two of six or three of eight; a link throttled between two
healthy nodes is reported as the link, naming no node; without a throttle nobody is named in
five runs in a row; a node whose NCCL setting contradicts its hardware is named with the
doctor's fix.

Throttling is torchpod_toolkit.cluster.throttle's (a node: tbf on its eth0; a link: an htb
class for the other end's address only, on both ends). Each node is throttled right after it
starts, before its torch import ends, so the first round is already measured through it; a
link is throttled once both its ends run and before the last node starts.
"""

from __future__ import annotations

import os
import shutil
import time

import pytest

from torchpod_toolkit.cluster import throttle

from needs import missing

PREFLIGHT = ["-m", "torchpod.preflight", "--pair-bytes", "4M", "--max-bytes", "1M", "--iters", "3",
             "--warmup", "1"]


def _can_throttle() -> None:
    if os.geteuid() != 0:
        missing("root: throttling a container's link enters its network namespace from the host")
    if not (shutil.which("nsenter") and shutil.which("tc")):
        missing("nsenter and tc on the host to throttle a container's link (apt-get install iproute2 util-linux, "
                "or ./setup.sh --tests)")


def _throttle(container) -> None:
    _can_throttle()
    throttle.node(container)


def _throttle_link(a, b) -> None:
    _can_throttle()
    throttle.link(a, b)


def _report(cl) -> dict:
    found = [r for r in cl.results() if r.get("workload") == "preflight"]
    assert len(found) == 1, cl.all_logs()[-8000:]
    return found[0]


def _start_throttled(cl, throttled) -> float:
    """Start the nodes in order, throttling each of ``throttled`` as soon as it runs; the start time."""
    t0 = time.time()
    for run in cl.nodes:
        cl.start(only=[run.node.index])
        if run.node.index in throttled:
            _throttle(run.container)
    return t0


@pytest.mark.parametrize(("nodes", "throttled"), [
    (4, (2,)),          # one node
    (4, (0,)),          # the rendezvous host
    (6, (1, 4)),        # two of six: four of the six ring pairs touch a slow node
    (8, (0, 1, 5)),     # three of eight, two of them side by side, one the rendezvous host
], ids=["one-of-4", "rendezvous-host", "two-of-6", "three-of-8"])
def test_preflight_names_exactly_the_throttled_nodes_within_60_s(make_cluster, nodes, throttled):
    cl = make_cluster("slurm", nodes, PREFLIGHT)
    t0 = _start_throttled(cl, throttled)
    codes = cl.wait(180)
    took = time.time() - t0
    report = _report(cl)
    slow_hosts = sorted(cl.nodes[i].node.hostname for i in throttled)
    named = sorted(v["hostname"] for v in report["nodes"] if v["node"] in report["slow_nodes"])
    assert named == slow_hosts, (report["rounds"], report["rule"], cl.all_logs()[-6000:])
    failing = sorted(v["hostname"] for v in report["nodes"] if v["node"] in report["failing"])
    assert failing == slow_hosts, report["nodes"]
    assert report["decided"] and report["undecided_nodes"] == [], report["rounds"]
    assert all(r["seconds"] > 0 for r in report["rounds"]), report["rounds"]  # each round timed
    assert codes == [1] * nodes, codes  # every rank exits 1 when a node failed
    assert took < 60, f"preflight on {nodes} nodes took {took:.0f} s"


def test_preflight_reports_a_throttled_link_and_names_no_node(make_cluster):
    cl = make_cluster("slurm", 4, PREFLIGHT)
    for run in cl.nodes[:3]:
        cl.start(only=[run.node.index])
    # before the last node starts: no round can be measured without it, so none is measured
    # while tc swaps the two ends' qdiscs (a swap stalls what is in flight through them)
    _throttle_link(cl.nodes[1].container, cl.nodes[2].container)
    cl.start(only=[3])
    codes = cl.wait(120)
    report = _report(cl)
    assert report["slow_nodes"] == [] and report["failing"] == [], (report["pairs"], report["nodes"])
    assert report["slow_links"] == [[1, 2]], report["rounds"]
    warned = {v["node"]: [r["code"] for r in v["reasons"] if r["code"].startswith("preflight.")]
              for v in report["nodes"]}
    assert warned == {0: [], 1: ["preflight.slow-pair"], 2: ["preflight.slow-pair"], 3: []}, report["nodes"]
    assert codes == [0, 0, 0, 0], (codes, cl.all_logs()[-6000:])


def test_preflight_without_a_throttle_names_nobody_five_runs_in_a_row(make_cluster):
    for run in range(5):  # one clean run proves little: a false positive must not come by chance
        with make_cluster("slurm", 4, [*PREFLIGHT, "--json", "/tmp/preflight.json"]).start() as cl:
            codes = cl.wait(120)
            report = _report(cl)
            assert report["slow_nodes"] == [] and report["failing"] == [], (run, report["pairs"], report["nodes"])
            assert codes == [0, 0, 0, 0], (run, cl.all_logs()[-6000:])
            assert len(report["pairs"]) == 4 and all(p["busbw_gbps"] > 0 for p in report["pairs"])
            assert "busbw(GB/s)" in cl.all_logs()


def _roce_tree(root: str) -> dict[str, str]:
    """A one-port RoCE device as sysfs shows it (linux drivers/infiniband/core/sysfs.c), the
    shape tests/unit/fixtures/fabrics.yaml records; only one node gets it."""
    base = f"{root}/class/infiniband/mlx5_0/ports/1"
    files = {f"{base}/state": "4: ACTIVE\n", f"{base}/link_layer": "Ethernet\n"}
    gids = ["fe80:0000:0000:0000:0a58:a9ff:fe00:1234", "0000:0000:0000:0000:0000:ffff:ac12:8003"]
    for i, gid in enumerate(gids):
        files.update({f"{base}/gids/{i}": gid + "\n", f"{base}/gid_attrs/types/{i}": "RoCE v2\n",
                      f"{base}/gid_attrs/ndevs/{i}": "eth0\n"})
    return files


def test_preflight_names_the_node_whose_nccl_setting_contradicts_its_hardware(make_cluster):
    # every node gets NCCL_IB_GID_INDEX=x; only node 1 has a RoCE port for it to contradict
    root = "/tmp/preflight-sysfs"
    cl = make_cluster("slurm", 4, PREFLIGHT, env={"TORCHPOD_SYSFS_ROOT": root, "NCCL_IB_GID_INDEX": "x"},
                      node_files={1: _roce_tree(root)}).start()
    codes = cl.wait(120)
    report = _report(cl)
    host = cl.nodes[1].node.hostname
    assert [v["hostname"] for v in report["nodes"] if v["node"] in report["failing"]] == [host], report["nodes"]
    mine = next(v for v in report["nodes"] if v["hostname"] == host)
    setting = [r for r in mine["reasons"] if r["code"] == "roce.user.gid-index-not-digits"]
    assert setting and setting[0]["fix"] and "NCCL_IB_GID_INDEX='x'" in setting[0]["detail"], mine
    assert report["slow_nodes"] == [] and codes == [1, 1, 1, 1], (report["pairs"], codes)
    assert "fix:" in cl.all_logs()
