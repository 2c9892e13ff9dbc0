"""The generated Slurm script on a real Slurm cluster: slurmctld and two slurmd nodes
(Debian's slurm-wlm 22.05 and munge) in containers built on the image under test. The
script is `sbatch`ed as generated (`--runtime none`: the nodes are the image), real `srun`
starts one launcher per node, and every rank's all-reduce is checked."""

from __future__ import annotations

import pytest

from torchpod_toolkit.cluster import runner, slurm
from torchpod_toolkit.manifests.render import render
from torchpod_toolkit.manifests.spec import JobSpec

from cluster_helpers import EXAMPLES, LABEL, NODE_ENV

NODES = 2


@pytest.fixture
def slurm_cluster(docker_client, cluster_image, test_label):
    image = slurm.node_image(docker_client, cluster_image)
    with slurm.SlurmCluster(docker_client, image, NODES, test_label, env=dict(NODE_ENV)) as cl:
        yield cl.start()
    assert not docker_client.containers.list(all=True, filters={"label": f"{LABEL}={test_label[LABEL]}"})


def test_generated_sbatch_script_runs_one_launcher_per_node(slurm_cluster):
    check = (f"{EXAMPLES}/allreduce_check.py", "--expect-world", str(NODES), "--expect-nodes", str(NODES))
    (script,) = render(JobSpec("slurm", NODES, "registry.example.com/torchpod/pytorch:2.13.0", check,
                               name="ddp", gpus_per_node=0, runtime="none", walltime="00:10:00"))
    jobid = slurm_cluster.submit(script.text, script.name)
    state = slurm_cluster.wait(jobid, timeout=240)
    out = slurm_cluster.read(f"{slurm.SHARED}/ddp-{jobid}.out")
    assert state == "COMPLETED", f"job {jobid}: {state}\n{out[-6000:]}\n{slurm_cluster.logs()}"
    results = [r for r in runner.parse_results(out) if r["workload"] == "allreduce_check"]
    assert sorted(r["rank"] for r in results) == list(range(NODES)), out[-6000:]
    assert all(r["ok"] and r["world_size"] == NODES and r["nodes"] == NODES for r in results), results
    assert {h for r in results for h in r["hosts"]} == set(slurm.node_names(NODES))
    assert out.count("torchpod: slurm: node ") == NODES, out[-4000:]  # one launcher on each node


def test_slurm_conf_names_every_node_and_no_cgroup_plugin():
    conf = slurm.slurm_conf(slurm.node_names(3))
    assert "NodeName=c1,c2,c3 " in conf and "SlurmctldHost=slurmctld" in conf
    assert "cgroup" not in conf.replace("# cgroup", "").split("ProctrackType=")[1].split("\n")[0]
