"""`torchpod run -m torchpod.preflight` on containers as nodes: one node's link throttled
from the host (tc tbf on the container's eth0, entered with nsenter: iproute2 on the host,
nothing added to the image) is named, and only it; without a throttle nobody is named in five
runs in a row; a node whose NCCL setting contradicts its hardware is named with the doctor's fix.

tbf: iproute2's tc-tbf(8); nsenter -n enters the container's network namespace by the PID
`docker inspect` reports (State.Pid, Docker Engine API ContainerInspect).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from needs import missing

PREFLIGHT = ["-m", "torchpod.preflight", "--pair-bytes", "4M", "--max-bytes", "1M", "--iters", "3",
             "--warmup", "1"]
THROTTLED = 2
# 100 Mbit/s against a bridge's GB/s: the throttled node's pairs fall far under half the median
TBF = ["tbf", "rate", "100mbit", "burst", "64kb", "latency", "400ms"]


def _throttle(container) -> None:
    """Throttle the egress of a running container's eth0 from the host."""
    if os.geteuid() != 0:
        missing("root: throttling a container's link enters its network namespace from the host")
    if not (shutil.which("nsenter") and shutil.which("tc")):
        missing("nsenter and tc on the host to throttle a container's link (apt-get install iproute2 util-linux, "
                "or ./setup.sh --tests)")
    container.reload()
    pid = int(container.attrs["State"]["Pid"])
    if pid <= 0:
        pytest.fail(f"container {container.name} has no PID to enter: {container.attrs['State']}")
    subprocess.run(["nsenter", "-t", str(pid), "-n", "tc", "qdisc", "add", "dev", "eth0", "root", *TBF],
                   check=True, capture_output=True, timeout=30)


def _report(cl) -> dict:
    found = [r for r in cl.results() if r.get("workload") == "preflight"]
    assert len(found) == 1, cl.all_logs()[-8000:]
    return found[0]


def test_preflight_names_exactly_the_throttled_node_within_60_s(make_cluster):
    cl = make_cluster("slurm", 4, PREFLIGHT).start()
    t0 = time.time()
    _throttle(cl.nodes[THROTTLED].container)
    codes = cl.wait(120)
    took = time.time() - t0
    report = _report(cl)
    slow_host = cl.nodes[THROTTLED].node.hostname
    named = [v["hostname"] for v in report["nodes"] if v["node"] in report["slow_nodes"]]
    assert named == [slow_host], (report["pairs"], cl.all_logs()[-6000:])
    failing = [v["hostname"] for v in report["nodes"] if v["node"] in report["failing"]]
    assert failing == [slow_host], report["nodes"]
    assert codes == [1, 1, 1, 1], codes  # every rank exits 1 when a node failed
    assert took < 60, f"preflight took {took:.0f} s"


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
