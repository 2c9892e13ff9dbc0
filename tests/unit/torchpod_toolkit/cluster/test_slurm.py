"""torchpod_toolkit.cluster.slurm, its pure part: the slurm.conf the containers get. (The
cluster itself, real sbatch and srun: tests/cluster/test_slurm_cluster.py.)"""

from __future__ import annotations

import pytest

from torchpod_toolkit.cluster import slurm


@pytest.mark.parametrize("n, cpus", [(1, 1), (3, 2), (12, 4)])
def test_every_node_is_declared_once_with_its_cpus_and_every_key_is_set_once(n, cpus):
    nodes = slurm.node_names(n)
    assert nodes == [f"c{i}" for i in range(1, n + 1)] and slurm.CONTROLLER not in nodes
    lines = slurm.slurm_conf(nodes, cpus=cpus).splitlines()
    assert f"NodeName={','.join(nodes)} CPUs={cpus} RealMemory={slurm.NODE_MEMORY_MB} State=UNKNOWN" in lines
    keys = [line.split("=", 1)[0] for line in lines if line]
    assert len(keys) == len(set(keys)), keys  # slurmctld takes the last of two: one would be dead
    assert all(line == line.strip() and "=" in line for line in lines if line)


def test_slurm_conf_names_every_node_and_no_cgroup_plugin_and_binds_tasks():
    conf = slurm.slurm_conf(slurm.node_names(3))
    assert "NodeName=c1,c2,c3 " in conf and "SlurmctldHost=slurmctld" in conf
    assert "TaskPlugin=task/affinity" in conf.splitlines()  # a task runs on the CPUs it asked for
    assert "cgroup" not in conf.replace("# cgroup", "").split("ProctrackType=")[1].split("\n")[0]


def test_slurm_conf_lets_a_requeued_job_start_again_within_seconds():
    conf = slurm.slurm_conf(slurm.node_names(2)).splitlines()
    assert f"AuthInfo=cred_expire={slurm.CRED_EXPIRE_S}" in conf and 5 <= slurm.CRED_EXPIRE_S < 120
    assert "SchedulerParameters=bf_interval=2,sched_interval=5" in conf
    assert not any(line.startswith(("JobRequeue=0", "JobFileAppend")) for line in conf)


def test_a_tree_topology_is_a_plugin_line_and_a_switch_per_leaf_under_one_top():
    assert "TopologyPlugin" not in slurm.slurm_conf(["c1"])
    assert "TopologyPlugin=topology/tree" in slurm.slurm_conf(["c1", "c2"], tree=True).splitlines()
    text = slurm.topology_conf({"sw-zeta": ["c1", "c3"], "sw-alpha": ["c2", "c4"]})
    assert text.splitlines() == ["SwitchName=sw-zeta Nodes=c1,c3", "SwitchName=sw-alpha Nodes=c2,c4",
                                 "SwitchName=top Switches=sw-zeta,sw-alpha"]
