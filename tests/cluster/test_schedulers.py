"""Each scheduler's environment, as that scheduler sets it, makes real containers form one
gloo group through `torchpod run`, and the all-reduced vector is checked on every rank."""

from __future__ import annotations

import pytest

from torchpod_toolkit.cluster import scenarios

from cluster_helpers import EXAMPLES, assert_group

CHECK = [f"{EXAMPLES}/allreduce_check.py", "--expect-world", "2", "--expect-nodes", "2"]


@pytest.mark.parametrize("scenario", list(scenarios.SCENARIOS))
def test_scheduler_forms_one_group_across_two_containers(scenario, make_cluster):
    cl = make_cluster(scenario, 2, CHECK).start()
    assert_group(cl, cl.wait(180), world=2, nodes=2)


@pytest.mark.parametrize("scenario", ["volcano", "kubeflow-elastic", "lws", "jobset"])
def test_host_network_names_differ_from_listed_names(scenario, make_cluster):
    """hostNetwork pods / HPC nodes (OCI OKE RDMA recipe): `hostname` is the machine's name, which no
    other node resolves; only the listed names connect, so the launcher must advertise
    the listed name (--local-addr)."""
    cl = make_cluster(scenario, 2, CHECK, host_network=True).start()
    results = assert_group(cl, cl.wait(180), world=2, nodes=2)
    listed = {name for run in cl.nodes for name in run.node.names}
    assert not (set(results[0]["hosts"]) & listed), "hostnames should differ from the listed names"


def test_pbs_short_hostnames_match_fqdn_nodefile_with_duplicates(make_cluster):
    cl = make_cluster("pbs", 2, CHECK)
    nodefile = dict(cl.topology.nodes[0].files)
    lines = next(iter(nodefile.values())).split()
    assert len(lines) == 4 and all("." in h for h in lines)  # mpiprocs=2, FQDNs
    assert all("." not in run.node.hostname for run in cl.nodes)  # hosts say short names
    cl.start()
    assert_group(cl, cl.wait(180), world=2, nodes=2)


def test_heterogeneous_nodes_two_processes_and_one(make_cluster):
    check = [f"{EXAMPLES}/allreduce_check.py", "--expect-world", "3", "--expect-nodes", "2"]
    cl = make_cluster("slurm", 2, check, nproc=(2, 1)).start()
    results = assert_group(cl, cl.wait(180), world=3, nodes=2)
    per_host = sorted(r["local_world_size"] for r in results)
    assert per_host == [1, 2, 2]
