"""The cluster harness's topologies resolve as the launcher expects, and restarts get the
TCPStore opt-out (launcher fixes found by tests/cluster)."""

from __future__ import annotations

import pytest

from torchpod.errors import InputError
from torchpod.resolve import resolve
from torchpod.schedulers.common import Facts
from torchpod.torchrun_flags import split_command_line
from torchpod_toolkit.cluster import topology


def _plan(node, argv=("x.py",), tmp_path=None):
    env = dict(node.env)
    for path, text in node.files:  # PBS_NODEFILE: write it under a temp root
        target = tmp_path / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        env = {k: (str(target) if v == path else v) for k, v in env.items()}
    env = {k: v.replace(topology.IP_OF_NODE0, "10.0.0.10") for k, v in env.items()}
    env["CUDA_VISIBLE_DEVICES"] = ""
    return resolve(env, Facts(hostname=node.hostname), split_command_line([*node.options, *argv]))  # JobSet: --nnodes


# Host-network style applies where the scheduler gives each node its listed name or its
# index (PBS_NODENUM, PALS_NODEID, or the manifest's downward-API POD_NAME/REPLICA_INDEX);
# the env:// convention addresses nodes by pod name and tells a node neither, and a
# TrainJob cannot ask for hostNetwork at all (below).
HOST_NETWORK_CASES = [(s, False) for s in topology.SCENARIOS] + [
    (s, True) for s in topology.SCENARIOS if s not in ("env", "trainer")]


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
        if plan.local_addr is not None:
            assert plan.local_addr in node.names  # what other containers can resolve


def test_model_renders_real_world_names():
    # the unit fixtures render nodes with the names real jobs have
    topo = topology.build("slurm", 3, "train", hosts=["gpu001", "gpu002", "gpu010"], job_number="4242")
    env = topo.nodes[2].env_dict
    assert env["SLURM_JOB_NODELIST"] == "gpu[001-002,010]" and env["SLURM_NODEID"] == "2"
    assert env["SLURM_JOB_ID"] == "4242" and topo.nodes[2].hostname == "gpu010"
    pbs = topology.build("pbs", 2, "ddp", hosts=["n1.hpc", "n3.hpc"], job_number="12")
    (path, text), = pbs.nodes[1].files
    assert text == "n1.hpc\nn1.hpc\nn3.hpc\nn3.hpc\n" and pbs.nodes[1].env_dict["PBS_NODEFILE"] == path
    assert pbs.nodes[1].hostname == "n3" and pbs.nodes[1].env_dict["PBS_NODENUM"] == "1"


@pytest.mark.parametrize("hosts", [["gpu001"], ["a1", "a2", "a3", "b7", "login"], ["n9", "n10"],
                                   ["x01", "x03", "x04"], ["r1-n08", "r1-n09"]])
def test_compressed_host_lists_expand_back(hosts):
    from torchpod.schedulers.slurm import expand_hostlist

    assert expand_hostlist("L", topology.compress_hostlist(hosts)) == tuple(hosts)


def test_topology_rejects_unknown_scheduler_and_bad_counts():
    from torchpod.errors import InputError

    with pytest.raises(InputError, match="expected one of"):
        topology.build("lsf", 2, "j")
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


def test_demo_summary_names_the_group_for_every_workload():
    from torchpod_toolkit.cluster.demo import summary_lines

    topo = topology.build("slurm", 2, "demo-1")
    bench = [{"workload": "allreduce_bench", "rank": r, "world_size": 2, "backend": "gloo", "peak_busbw_gbps": 1.0}
             for r in (0, 1)]
    assert summary_lines(bench, 2, topo, 0.0) == [
        "nodes 2, world size 2, scheduler slurm (detected as slurm)",
        "all-reduce peak busbw 1.000 GB/s (gloo, 2 ranks); the table is in node 0's output"]
    train = [{"workload": "ddp_resnet", "rank": r, "world_size": 2, "t_first_allreduce": 104.4} for r in (0, 1)]
    assert summary_lines(train, 2, topo, 100.0) == [
        "nodes 2, world size 2, scheduler slurm (detected as slurm), first all-reduce after 4.4 s"]
    assert summary_lines([], 2, topo, 0.0) == ["nodes 2: no rank reported a result"]
