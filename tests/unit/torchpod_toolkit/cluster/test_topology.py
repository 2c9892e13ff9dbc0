"""The cluster harness's topologies resolve as the launcher expects (every node its own
index, an elastic job its range), bad requests are one line, and restarts get the TCPStore
opt-out (launcher fixes found by tests/cluster). What each platform's nodes carry:
test_scenarios.py."""

from __future__ import annotations

import pytest

from torchpod.errors import InputError
from torchpod.resolve import resolve
from torchpod.schedulers.common import Facts
from torchpod.torchrun_flags import split_command_line
from torchpod_toolkit.cluster import scenarios, topology
from torchpod_toolkit.cluster.nodes import fill_ips

IPS = [f"10.0.0.{10 + i}" for i in range(8)]  # the addresses the runner would give nodes 0..7


def _plan(node, argv=("x.py",), tmp_path=None):
    env = dict(node.env)
    for path, text in node.files:  # PBS_NODEFILE: write it under a temp root
        target = tmp_path / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        env = {k: (str(target) if v == path else v) for k, v in env.items()}
    env = {k: fill_ips(v, IPS) for k, v in env.items()}
    env["CUDA_VISIBLE_DEVICES"] = ""
    return resolve(env, Facts(hostname=node.hostname), split_command_line([*node.options, *argv]))  # JobSet: --nnodes


# Host-network style applies where the scheduler gives each node its listed name or its
# index (PBS_NODENUM, PALS_NODEID, or the manifest's downward-API POD_NAME/REPLICA_INDEX);
# the env:// convention addresses nodes by pod name and tells a node neither, LSF finds a
# node only by its hostname in the host file, and a TrainJob cannot ask for hostNetwork at
# all (below).
HOST_NETWORK_CASES = [(s, False) for s in scenarios.SCENARIOS] + [
    (s, True) for s in scenarios.SCENARIOS if s not in ("env", "trainer", "lsf")]


def test_a_trainjob_cannot_be_played_with_host_network():
    with pytest.raises(InputError, match="runtimePatches cannot set hostNetwork"):
        topology.build("trainer", 2, "job-1", host_network=True)


@pytest.mark.parametrize("scenario, host_network", HOST_NETWORK_CASES)
def test_every_node_of_a_topology_resolves_to_its_own_index(scenario, host_network, tmp_path):
    topo = topology.build(scenario, 3, "job-1", nproc=(2, 1, 1), host_network=host_network)
    plans = [_plan(n, tmp_path=tmp_path) for n in topo.nodes]
    assert {p.scheduler for p in plans} == {topo.scheduler}
    assert len({p.rdzv_endpoint for p in plans}) == 1 and len({p.rdzv_id for p in plans}) == 1
    assert [p.nproc_per_node for p in plans] == ["2", "1", "1"]
    if scenario != "kubeflow-elastic":
        assert {str(p.nnodes) for p in plans} == {"3"}
    assert [p.node_rank for p in plans] == [0, 1, 2]
    for node, plan in zip(topo.nodes, plans):
        if plan.local_addr is not None:  # what other containers can resolve, or this node's own IP
            assert plan.local_addr in node.names or plan.local_addr == IPS[node.index]


@pytest.mark.parametrize("scenario", ["kubeflow-elastic", "volcano"])
@pytest.mark.parametrize("host_network", [False, True])
def test_an_elastic_job_plays_its_max_nodes_each_planning_min_max(scenario, host_network, tmp_path):
    """min_nodes renders the job as `--nodes 2:3` (what the cluster tier's lost-node test runs)."""
    topo = topology.build(scenario, 3, "job-1", min_nodes=2, host_network=host_network)
    plans = [_plan(n, tmp_path=tmp_path) for n in topo.nodes]
    assert [str(p.nnodes) for p in plans] == ["2:3"] * 3 and [p.node_rank for p in plans] == [0, 1, 2]
    assert {p.max_restarts for p in plans} == {3}


@pytest.mark.parametrize("scenario", ["kubeflow", "volcano-master", "slurm", "env", "mpi"])
def test_min_nodes_for_a_fixed_size_scenario_is_one_error_naming_it(scenario):
    with pytest.raises(InputError, match=f"^(min_nodes=2 with scheduler {scenario}|--nodes=2:3 with --scheduler "
                                         f"{scenario}): a fixed"):
        topology.build(scenario, 3, "job-1", min_nodes=2)



def test_topology_rejects_unknown_scheduler_and_bad_counts():
    from torchpod.errors import InputError

    with pytest.raises(InputError, match="expected one of"):
        topology.build("cobalt", 2, "j")
    with pytest.raises(InputError, match="one per node"):
        topology.build("slurm", 2, "j", nproc=(1,))


def test_max_restarts_disables_the_shared_store_unless_the_user_set_it():
    env = {"VC_TASK_INDEX": "1", "VC_WORKER_HOSTS": "a-worker-0.a,a-worker-1.a", "VC_WORKER_NUM": "2",
           "CUDA_VISIBLE_DEVICES": ""}
    plan = resolve(env, Facts(hostname="a-worker-1"), split_command_line(["--max-restarts", "3", "x.py"]))
    assert dict(plan.env)["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
    plan = resolve(env, Facts(hostname="a-worker-1"), split_command_line(["x.py"]))
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" not in dict(plan.env)
    mine = dict(env, TORCH_DISABLE_SHARE_RDZV_TCP_STORE="0")
    plan = resolve(mine, Facts(hostname="a-worker-1"), split_command_line(["--max-restarts=2", "x.py"]))
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" not in dict(plan.env)

