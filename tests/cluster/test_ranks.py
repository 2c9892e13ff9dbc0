"""torch's ranks are the nodes torchpod names: twelve containers per scheduler, a
LeaderWorkerSet group of four, and two nodes named by addresses that sort against their order. Every rank reports RANK,
GROUP_RANK and its hostname; each must equal what `torchpod run` printed on that node
("node N of 12 (group rank N)"), which is what `torchpod plan` says there.

Without torchpod's order, torch's c10d rendezvous sorts the nodes' addresses as text:
``job-worker-10`` would be group rank 2 of 12, and the node at the higher address of two
would be rank 1 however the scheduler numbered it."""

from __future__ import annotations

import pytest

from cluster_helpers import EXAMPLES, assert_group, assert_ranks_are_the_named_nodes


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
