"""The cluster harness's topologies resolve as the launcher expects, each platform's nodes
carry what it sets (and the addresses the runner fills in), and restarts get the TCPStore
opt-out (launcher fixes found by tests/cluster)."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchpod.errors import InputError
from torchpod.resolve import resolve
from torchpod.schedulers.common import Facts
from torchpod.torchrun_flags import split_command_line
from torchpod_toolkit.cluster import topology

IPS = [f"10.0.0.{10 + i}" for i in range(8)]  # the addresses the runner would give nodes 0..7


def _plan(node, argv=("x.py",), tmp_path=None):
    env = dict(node.env)
    for path, text in node.files:  # PBS_NODEFILE: write it under a temp root
        target = tmp_path / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        env = {k: (str(target) if v == path else v) for k, v in env.items()}
    env = {k: topology.fill_ips(v, IPS) for k, v in env.items()}
    env["CUDA_VISIBLE_DEVICES"] = ""
    return resolve(env, Facts(hostname=node.hostname), split_command_line([*node.options, *argv]))  # JobSet: --nnodes


# Host-network style applies where the scheduler gives each node its listed name or its
# index (PBS_NODENUM, PALS_NODEID, or the manifest's downward-API POD_NAME/REPLICA_INDEX);
# the env:// convention addresses nodes by pod name and tells a node neither, LSF finds a
# node only by its hostname in the host file, and a TrainJob cannot ask for hostNetwork at
# all (below).
HOST_NETWORK_CASES = [(s, False) for s in topology.SCENARIOS] + [
    (s, True) for s in topology.SCENARIOS if s not in ("env", "trainer", "lsf")]


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
    assert topology.needs_ips(sky.nodes)
    ips = ["10.1.0.5", "10.1.0.6", "10.1.0.7"]
    assert topology.fill_ips(sky.nodes[1].env_dict["SKYPILOT_NODE_IPS"], ips) == "10.1.0.5\n10.1.0.6\n10.1.0.7"
    az = topology.build("azureml", 2, "t").nodes[1].env_dict
    assert topology.fill_ips(az["AZ_BATCH_MASTER_NODE"], ips) == "10.1.0.5:6105"
    assert topology.fill_ips(az["MASTER_ADDR"], ips) == "10.1.0.5" and az["NODE_RANK"] == "1"
    assert not topology.needs_ips(topology.build("slurm", 2, "t").nodes)


def test_an_address_for_a_node_the_runner_has_none_for_is_refused():
    with pytest.raises(ValueError, match=r"\{node2_ip\} names node 2; only 2 addresses"):
        topology.fill_ips("{node0_ip} {node2_ip}", ["10.0.0.1", "10.0.0.2"])


@given(text=st.text())
def test_text_without_placeholders_is_left_as_it_is(text):
    if not re.search(r"\{node\d+_ip\}", text, re.ASCII):
        assert topology.fill_ips(text, []) == text


# --- a manifest's securityContext, as the harness applies it to the containers ---------------
def _rendered_pod(**extra):
    import yaml

    from torchpod_toolkit.manifests.podsecurity import pod_specs
    from torchpod_toolkit.manifests.render import render
    from torchpod_toolkit.manifests.spec import JobSpec

    (out,) = [o for o in render(JobSpec("volcano", 2, "registry.example.com/t/p:1", ("t.py",), gpus_per_node=0,
                                        **extra)) if o.name.endswith(".yaml")]
    docs = [d for d in yaml.safe_load_all(out.text) if d]
    return docs, next(pod for _, pod in pod_specs(docs[0]))


def test_a_restricted_pods_security_becomes_the_containers():
    docs, pod = _rendered_pod(run_as_user=4242, run_as_group=0, fs_group=77)
    sec = topology.security_of(pod)
    assert sec == topology.Security(user="4242:0", groups=("77",), read_only=True, tmpfs=("/tmp",),
                                    cap_drop=("ALL",), cap_add=(), no_new_privileges=True)
    assert all(n.security == sec for n in topology.from_manifest(docs).nodes)


def test_an_rdma_pod_stays_root_with_ipc_lock_and_a_read_only_root():
    _, pod = _rendered_pod(rdma="device-plugin", rdma_resource="rdma/x")
    sec = topology.security_of(pod)
    assert sec.user is None and sec.cap_add == ("IPC_LOCK",) and sec.cap_drop == () and sec.read_only
