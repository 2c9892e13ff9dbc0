"""Each scenario's nodes carry what its platform sets: real-world names and host lists, the
files a batch system writes, and the addresses the runner fills in."""

from __future__ import annotations

import json

import pytest

from torchpod_toolkit.cluster import nodes, scenarios, topology


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

    assert expand_hostlist("L", scenarios.compress_hostlist(hosts)) == tuple(hosts)


# --- SageMaker, LSF, SkyPilot, Flux, AzureML: what each platform's nodes carry ---------------
def test_sagemaker_lists_hosts_lexicographically_and_the_container_is_named_otherwise():
    topo = topology.build("sagemaker", 12, "big")
    node = topo.nodes[1]
    hosts = json.loads(node.env_dict["SM_HOSTS"])
    assert hosts == sorted(f"algo-{k}" for k in range(1, 13)) and hosts[:3] == ["algo-1", "algo-10", "algo-11"]
    assert node.env_dict["SM_CURRENT_HOST"] == "algo-10" == node.names[0] != node.hostname
    ((path, text),) = node.files
    assert path == "/opt/ml/input/config/resourceconfig.json"
    assert json.loads(text)["current_host"] == "algo-10" and json.loads(text)["hosts"] == hosts


def test_lsf_host_file_lists_each_host_once_as_span_ptile_one_allocates():
    topo = topology.build("lsf", 3, "train", hosts=["gpu01", "gpu02", "gpu03"], job_number="8812")
    env = topo.nodes[2].env_dict
    ((path, text),) = topo.nodes[2].files
    assert env["LSB_DJOB_HOSTFILE"] == path and text == "gpu01\ngpu02\ngpu03\n"
    assert env["LSB_MCPU_HOSTS"] == "gpu01 1 gpu02 1 gpu03 1" and env["LSB_JOBID"] == "8812"
    assert topo.nodes[2].hostname == "gpu03"


def _f58_decode(text: str) -> int:
    digits = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
    assert text[0] == "\u0192"
    number = 0
    for ch in text[1:]:
        number = number * 58 + digits.index(ch)
    return number


def test_flux_tasks_carry_the_job_shells_variables_and_the_scripts_exports():
    topo = topology.build("flux", 3, "train", hosts=["t10", "t11", "t12"], job_number="77")
    env = topo.nodes[2].env_dict
    assert _f58_decode(env["FLUX_JOB_ID"]) == 77 << 24 and env["FLUX_KVS_NAMESPACE"] == f"job-{77 << 24}"
    assert (env["FLUX_JOB_SIZE"], env["FLUX_JOB_NNODES"], env["FLUX_TASK_RANK"], env["FLUX_TASK_LOCAL_ID"]) == \
        ("3", "3", "2", "0")
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("t10", "29400")


def test_skypilot_and_azureml_hand_out_addresses_the_runner_fills_in():
    sky = topology.build("skypilot", 3, "t")
    assert nodes.needs_ips(sky.nodes)
    ips = ["10.1.0.5", "10.1.0.6", "10.1.0.7"]
    assert nodes.fill_ips(sky.nodes[1].env_dict["SKYPILOT_NODE_IPS"], ips) == "10.1.0.5\n10.1.0.6\n10.1.0.7"
    az = topology.build("azureml", 2, "t").nodes[1].env_dict
    assert nodes.fill_ips(az["AZ_BATCH_MASTER_NODE"], ips) == "10.1.0.5:6105"
    assert nodes.fill_ips(az["MASTER_ADDR"], ips) == "10.1.0.5" and az["NODE_RANK"] == "1"
    assert not nodes.needs_ips(topology.build("slurm", 2, "t").nodes)

