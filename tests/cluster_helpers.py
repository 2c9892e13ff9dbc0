"""Constants, assertions and waits shared by the cluster tests (a plain module on pytest's
``pythonpath``: a conftest is never imported by name)."""

from __future__ import annotations

import re
import time
import uuid

import pytest

from torchpod_toolkit.cluster import runner

EXAMPLES = runner.EXAMPLES
# Every container, network and volume a cluster test creates carries this label (the same
# one tests/conftest.py's image fixtures sweep), valued with the test's id, then a dot and the
# pytest session's id (label_value): a session sweeps only what it made, so two sessions, or
# two pytest-xdist workers, never remove each other's nodes.
LABEL = "torchpod.test"


def label_value(session: str) -> str:
    return f"{uuid.uuid4().hex[:12]}.{session}"


def sweep_session(client, session: str) -> int:
    """Remove every container, network and volume of this session (``*.<session>``)."""
    removed = 0
    for kind in (client.containers, client.networks, client.volumes):
        for found in kind.list(**({"all": True} if kind is client.containers else {}), filters={"label": LABEL}):
            labels = (found.attrs.get("Labels") if kind is not client.containers else found.labels) or {}
            if labels.get(LABEL, "").endswith(f".{session}"):
                removed += runner.sweep(client, LABEL, labels[LABEL])
    return removed
# Every node: one thread per process on a 2-core CI machine; a bounded rendezvous wait.
NODE_ENV = {"OMP_NUM_THREADS": "1", "TORCHPOD_RDZV_TIMEOUT": "60", "PYTHONUNBUFFERED": "1"}


def wait_for_log(cl: runner.Cluster, index: int, text: str, timeout: float) -> str:
    """Poll a node's log until ``text`` appears; fail with every node's log otherwise."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        log = cl.logs(index)
        if text in log:
            return log
        time.sleep(0.5)
    pytest.fail(f"node {index} never printed {text!r} within {timeout:.0f} s\n{cl.all_logs()[-6000:]}")


def assert_group(cl: runner.Cluster, codes, *, world: int, nodes: int, workload: str = "allreduce_check"):
    """Every node exited 0, every rank reported ok, one group of ``world`` ranks on ``nodes`` hosts."""
    logs = cl.all_logs()
    assert codes == [0] * len(codes), f"exit codes {codes}\n{logs[-8000:]}"
    results = [r for r in cl.results() if r["workload"] == workload]
    assert sorted(r["rank"] for r in results) == list(range(world)), logs[-8000:]
    assert all(r["ok"] for r in results), [r for r in results if not r["ok"]]
    assert {r["world_size"] for r in results} == {world}
    if workload == "allreduce_check":
        hosts = {run.node.hostname for run in cl.nodes}
        assert all(set(r["hosts"]) == hosts and r["nodes"] == nodes for r in results), results
    assert len({r["run_id"] for r in results}) == 1, "ranks saw different rendezvous ids"
    for i in range(len(cl.nodes)):
        assert f"torchpod: {cl.topology.scheduler}: node " in cl.logs(i), cl.logs(i)[-3000:]
    return results


# the launch line `torchpod run` prints on every node
LAUNCH = re.compile(r"torchpod: [\w-]+: node (\d+) of (\d+) \(group rank (\d+)\)")


def assert_ranks_are_the_named_nodes(cl, results) -> None:
    """Each container's rank (one process per node) is the node index its launcher printed."""
    by_host = {r["hostname"]: r for r in results}
    for run in cl.nodes:
        said = LAUNCH.findall(cl.logs(run.node.index))
        assert len(said) == 1, cl.logs(run.node.index)[-3000:]
        node, _, group = (int(x) for x in said[0])
        got = by_host[run.node.hostname]
        assert node == group == run.node.index, (run.node.hostname, said)
        assert (got["group_rank"], got["rank"]) == (node, node), (run.node.hostname, got)


def ring_crossings(switch_of_rank: list[str]) -> int:
    """Edges of the ring rank 0 -> 1 -> ... -> 0 whose ends sit in different domains (switches,
    NVLink domains)."""
    n = len(switch_of_rank)
    return sum(switch_of_rank[r] != switch_of_rank[(r + 1) % n] for r in range(n))
