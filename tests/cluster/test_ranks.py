"""torch's ranks are the nodes torchpod names: twelve containers per scheduler, a
LeaderWorkerSet group of four, and two nodes named by addresses that sort against their order. Every rank reports RANK,
GROUP_RANK and its hostname; each must equal what `torchpod run` printed on that node
("node N of 12 (group rank N)"), which is what `torchpod plan` says there.

Without torchpod's order, torch's c10d rendezvous sorts the nodes' addresses as text:
``job-worker-10`` would be group rank 2 of 12, and the node at the higher address of two
would be rank 1 however the scheduler numbered it. Where the GPUs name an NVLink domain,
the nodes of one domain take contiguous ranks."""

from __future__ import annotations

import pytest
from nvidia_smi import MNNVL, MNNVL_DOMAIN, RECORDED, STAND_IN, other_clique, q_output

from torchpod.contract import ENV_NODE_RANK

from cluster_helpers import EXAMPLES, assert_group, assert_ranks_are_the_named_nodes, ring_crossings


def _check(nodes: int) -> list[str]:
    return [f"{EXAMPLES}/allreduce_check.py", "--expect-world", str(nodes), "--expect-nodes", str(nodes)]


# twelve pods: torch alone would rank the eleventh (-10) third; a LeaderWorkerSet group of
# four: torch alone would rank its leader (grp-0.grp) after its workers (grp-0-1.grp, ...)
@pytest.mark.parametrize("scenario, nodes", [("volcano", 12), ("kubeflow", 12), ("jobset", 12), ("lws", 4)])
def test_every_node_ranks_as_the_scheduler_numbers_it(scenario, nodes, make_cluster):
    cl = make_cluster(scenario, nodes, _check(nodes)).start()
    results = assert_group(cl, cl.wait(420), world=nodes, nodes=nodes)
    assert_ranks_are_the_named_nodes(cl, results)


def test_nodes_named_by_addresses_that_sort_against_their_order(make_cluster):
    """SkyPilot names nodes by IP (SKYPILOT_NODE_IPS, head first); node 0 gets the higher
    address, so its address sorts after node 1's."""
    cl = make_cluster("skypilot", 2, _check(2), descending_addresses=True).start()
    assert cl.addresses[0] > cl.addresses[1], cl.addresses  # as text, the order torch sorts by
    results = assert_group(cl, cl.wait(180), world=2, nodes=2)
    assert_ranks_are_the_named_nodes(cl, results)


# Four GB200-class nodes in two NVLink domains, alternating by node index (nodes 0 and 2 in
# clique 32766, nodes 1 and 3 in clique 2): each container's stand-in nvidia-smi prints its
# recorded `-q` output (tests/nvidia_smi.py), as the driver's fabric state would.
NVLINK_OF_NODE = {0: "32766", 1: "2", 2: "32766", 3: "2"}


def test_nodes_of_one_nvlink_domain_take_contiguous_ranks(make_cluster, tmp_path):
    """Every node reads its GPUs' NVLink domain (ClusterUUID.CliqueId) before the rendezvous,
    and torch's ranks keep each domain's nodes together, in node-index order inside it: a
    ring leaves each domain once (two crossings), where the index order would cross four
    times. Each worker is told the node its plan named (TORCHPOD_NODE_RANK)."""
    stand_in = tmp_path / "nvidia-smi"
    stand_in.write_text(STAND_IN)
    stand_in.chmod(0o755)
    files = {index: {RECORDED: q_output([other_clique(MNNVL, clique)] * 2)}
             for index, clique in NVLINK_OF_NODE.items()}
    check = [*_check(4), "--report-env", ENV_NODE_RANK, "--report-env", "JOB_COMPLETION_INDEX"]
    cl = make_cluster("jobset", 4, check, env={"CUDA_VISIBLE_DEVICES": ""}, node_files=files,
                      volumes={str(stand_in): {"bind": "/usr/local/bin/nvidia-smi", "mode": "ro"}}).start()
    results = sorted(assert_group(cl, cl.wait(300), world=4, nodes=4), key=lambda r: r["rank"])
    indexes = [int(r["env"][ENV_NODE_RANK]) for r in results]
    assert indexes == [int(r["env"]["JOB_COMPLETION_INDEX"]) for r in results], results
    by_rank = [NVLINK_OF_NODE[i] for i in indexes]
    assert ring_crossings(by_rank) == 2, by_rank  # the minimum: one edge out of each domain
    assert ring_crossings([NVLINK_OF_NODE[i] for i in range(4)]) == 4  # the index order's
    for clique in set(by_rank):  # inside a domain, the node index decides
        mine = [i for i in indexes if NVLINK_OF_NODE[i] == clique]
        assert mine == sorted(mine), (clique, indexes)
    for run in cl.nodes:  # the launcher said so: the domain in its plan, no group rank promised
        log = cl.logs(run.node.index)
        domain = f"nvlink:{MNNVL_DOMAIN.rsplit('.', 1)[0]}.{NVLINK_OF_NODE[run.node.index]}"
        assert f"node {run.node.index} of 4 (ranked in domain {domain})," in log, log[-3000:]
