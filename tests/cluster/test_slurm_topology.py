"""The topology/tree plugin on a real Slurm cluster: four nodes under two leaf switches,
named so that the node order alternates between them (c1 and c3 under ``sw-zeta``, c2 and
c4 under ``sw-alpha``). Slurm hands each task its switch path (SLURM_TOPOLOGY_ADDR); the
ranks torch gives must keep each switch's nodes together, so a ring crosses between the
two switches twice, where the node order (torch's own, and the index's) would cross four
times."""

from __future__ import annotations

import pytest

from torchpod_toolkit.cluster import runner, slurm
from torchpod_toolkit.manifests.render import render
from torchpod_toolkit.manifests.spec import JobSpec

from cluster_helpers import EXAMPLES, LABEL, NODE_ENV, label_value, ring_crossings

NODES = 4
LEAVES = {"sw-zeta": ["c1", "c3"], "sw-alpha": ["c2", "c4"]}
IMAGE = "registry.example.com/torchpod/pytorch:2.13.0"  # named in the script's header only (--runtime none)


@pytest.fixture(scope="module")
def tree_cluster(docker_client, cluster_image, dev_volumes, session_id):
    label = {LABEL: label_value(session_id)}
    image = slurm.node_image(docker_client, cluster_image)
    with slurm.SlurmCluster(docker_client, image, NODES, label, env=dict(NODE_ENV), volumes=dev_volumes,
                            leaves=LEAVES) as cl:
        yield cl.start()


def test_ranks_keep_each_switchs_nodes_together(tree_cluster):
    check = (f"{EXAMPLES}/allreduce_check.py", "--expect-world", str(NODES), "--expect-nodes", str(NODES),
             "--report-env", "SLURM_TOPOLOGY_ADDR", "--report-env", "SLURM_NODEID")
    (script,) = render(JobSpec("slurm", NODES, IMAGE, check, name="tree", gpus_per_node=0, runtime="none",
                               walltime="00:10:00"))
    jobid = tree_cluster.submit(script.text, script.name)
    state = tree_cluster.wait(jobid, timeout=300)
    out = tree_cluster.read(f"{slurm.SHARED}/tree-{jobid}.out")
    assert state == "COMPLETED", f"job {jobid}: {state}\n{out[-6000:]}\n{tree_cluster.logs()}"
    results = sorted((r for r in runner.parse_results(out) if r["workload"] == "allreduce_check"),
                     key=lambda r: r["rank"])
    assert [r["rank"] for r in results] == list(range(NODES)) and all(r["ok"] for r in results), out[-6000:]
    switch_of = {node: leaf for leaf, nodes in LEAVES.items() for node in nodes}
    for r in results:  # what Slurm told each task: top switch, leaf switch, node
        assert r["env"]["SLURM_TOPOLOGY_ADDR"] == f"top.{switch_of[r['hostname']]}.{r['hostname']}", r
    by_rank = [switch_of[r["hostname"]] for r in results]
    assert ring_crossings(by_rank) == len(LEAVES), by_rank  # the minimum: one edge out of each switch
    by_index = [switch_of[h] for h in slurm.node_names(NODES)]
    assert ring_crossings(by_index) == NODES  # what the node order (and torch's own) would cross
    for leaf in LEAVES:  # inside a switch, the node index decides
        mine = [int(r["env"]["SLURM_NODEID"]) for r in results if switch_of[r["hostname"]] == leaf]
        assert mine == sorted(mine), (leaf, results)
