"""torchpod_toolkit.manifests.operators: every pod the operator model says a manifest creates
(its hostname, files and environment) plans as intended when handed to the launcher."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchpod.errors import InputError
from torchpod.schedulers.common import Facts
from torchpod_toolkit.manifests import kube, operators
from torchpod_toolkit.manifests.spec import NODE_RANGE_KINDS, JobSpec, check

from launcher_cases import plan_for
from manifest_cases import IMAGE, KUBE_SPECS, spec_id


def _pod_plan(pod: operators.Pod, tmp_path: Path):
    env = dict(pod.env)
    root = tmp_path / pod.name
    for path, text in pod.files:
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    env["CUDA_VISIBLE_DEVICES"] = ""
    args = list(pod.args)
    assert args[0] == "run" and "--" in args, args  # the image's entrypoint, no shell
    split = args.index("--")
    return plan_for(env, tuple(args[1:split]), Facts(hostname=pod.hostname, root=root, sysfs_root=root / "sys"),
                    script=args[split + 1])


EXPECTED_SCHEDULER = {"volcano": "volcano", "volcano-master": "volcano", "kubeflow": "kubeflow",
                      "kubeflow-elastic": "kubeflow", "trainer": "kubeflow", "runai": "runai", "lws": "lws",
                      "jobset": "jobset"}


def _endpoint(spec: JobSpec) -> str:
    n = spec.name
    return {"volcano": f"{n}-worker-0.{n}", "volcano-master": f"{n}-master-0.{n}",
            "kubeflow": f"{n}-master-0", "runai": f"{n}-master-0", "kubeflow-elastic": f"{n}-worker-0",
            "trainer": f"{n}-node-0-0.{n}", "lws": f"{n}-0.{n}.{spec.namespace}",
            "jobset": f"{n}-node-0-0.{n}"}[spec.scheduler] + f":{check(spec).port}"


@pytest.mark.parametrize("spec", KUBE_SPECS, ids=spec_id)
def test_every_pod_the_operator_creates_plans_as_intended(spec, tmp_path):
    spec = check(spec)
    pods = operators.pods(kube.objects(spec))
    assert len(pods) == spec.nodes
    plans = [_pod_plan(p, tmp_path) for p in pods]
    assert {p.scheduler for p in plans} == {EXPECTED_SCHEDULER[spec.scheduler]}
    assert {str(p.nnodes).split(":")[-1] for p in plans} == {str(spec.nodes)}
    assert sorted(p.node_rank for p in plans) == list(range(spec.nodes))
    assert len({p.rdzv_id for p in plans}) == 1
    if spec.rdzv == "etcd":
        assert {(p.rdzv_backend, str(p.rdzv_endpoint)) for p in plans} == {("etcd-v2", spec.etcd_endpoint)}
    else:
        assert {str(p.rdzv_endpoint) for p in plans} == {_endpoint(spec)}
        hosts = [dict(p.rdzv_conf).get("is_host") for p in plans]
        assert hosts == ["true"] + ["false"] * (spec.nodes - 1), hosts
    if spec.preset:
        assert all(dict(p.env).get("NCCL_IB_HCA") or "TORCHPOD_PRESET" in dict(pod.env)
                   for p, pod in zip(plans, pods))


# --- Trainer (v2.3.0's torch plugin and admission; v2.4.0 changes neither) -----------------
@pytest.mark.parametrize("trainer, nproc", [
    ({"numProcPerNode": 4}, "4"),
    ({"numProcPerNode": 4, "resourcesPerNode": {"limits": {"cpu": "64"}}}, "4"),  # given wins
    ({"resourcesPerNode": {"limits": {"nvidia.com/gpu": "4"}}}, "auto"),  # torchrun counts the GPUs
    ({"resourcesPerNode": {"requests": {"nvidia.com/gpu": 0}, "limits": {"nvidia.com/gpu": 2}}}, "auto"),
    ({"resourcesPerNode": {"requests": {"cpu": "3"}, "limits": {"cpu": "8"}}}, "3"),  # requests first
    ({"resourcesPerNode": {"limits": {"cpu": "2500m"}}}, "3"),  # Quantity.Value() rounds up
    ({"resourcesPerNode": {"requests": {"cpu": "0.5"}}}, "1"),
    ({"resourcesPerNode": {"requests": {"memory": "8Gi"}}}, "1"),  # no GPU, no CPU: at least 1
    ({}, "1"),
])
def test_the_torch_plugins_process_count(trainer, nproc):
    assert operators.trainer_nproc(trainer) == nproc


@pytest.mark.parametrize("trainer, needle", [
    ({"numProcPerNode": "auto"}, "trainer.numProcPerNode 'auto'"),  # an int32 since v2.2
    ({"numProcPerNode": 0}, "expected a whole number >= 1"),
    ({"numProcPerNode": True}, "numProcPerNode True"),
    ({"resourcesPerNode": {"limits": {"cpu": "2k"}}}, "quantity '2k' is not modelled"),
    ({"resourcesPerNode": {"limits": {"cpu": "1\n"}}}, "is not modelled"),
])
def test_a_process_count_the_torch_plugin_would_not_take_is_refused(trainer, needle):
    with pytest.raises(InputError, match=re.escape(needle)):
        operators.trainer_nproc(trainer)


@pytest.mark.parametrize("name, trainer, needle", [
    ("Train", {}, "DNS-1035 label"),
    ("t" * 64, {}, "at most 63"),
    ("t" * 45, {"numNodes": 100_000}, "longest pod name"),
    ("train", {"env": [{"name": "PET_NNODES", "value": "9"}]}, "trainer.env sets PET_NNODES"),
])
def test_what_trainers_admission_refuses_the_model_refuses(name, trainer, needle):
    with pytest.raises(InputError, match=re.escape(needle)):
        operators.trainer_admitted(name, trainer)
    operators.trainer_admitted("t" * 44, {"numNodes": 100_000, "env": [{"name": "TORCHPOD_PRESET", "value": "x"}]})


def test_a_cpu_trainjob_runs_one_process_per_node():
    docs = kube.objects(check(JobSpec("trainer", 2, IMAGE, ("t.py",), gpus_per_node=0)))
    assert {p.env_dict["PET_NPROC_PER_NODE"] for p in operators.pods(docs)} == {"1"}


# --- LeaderWorkerSet and JobSet: the pods their controllers make -------------------------
def _objects(kind: str, nodes: int = 3, **kw):
    return kube.objects(check(JobSpec(kind, nodes, IMAGE, ("train.py",), name="llama", namespace="ml",
                                      gpus_per_node=0, **kw)))


def test_lws_makes_the_leader_and_its_workers_with_the_controllers_variables():
    pods = operators.pods(_objects("lws"))
    assert [(p.name, p.hostname) for p in pods] == [("llama-0", "llama-0"), ("llama-0-1", "llama-0-1"),
                                                     ("llama-0-2", "llama-0-2")]
    assert [p.env_dict["LWS_WORKER_INDEX"] for p in pods] == ["0", "1", "2"]
    assert {(p.env_dict["LWS_LEADER_ADDRESS"], p.env_dict["LWS_GROUP_SIZE"]) for p in pods} \
        == {("llama-0.llama.ml", "3")}
    assert pods[0].dns_names == ("llama-0.llama", "llama-0.llama.ml")
    labels = dict(pods[2].labels)
    assert (labels["leaderworkerset.sigs.k8s.io/group-index"], labels["leaderworkerset.sigs.k8s.io/worker-index"]) \
        == ("0", "2")


def test_each_lws_group_has_its_own_leader_and_a_subdomain_of_its_own_when_asked():
    (lws,) = _objects("lws")
    lws["spec"].update(replicas=2, networkConfig={"subdomainPolicy": "UniquePerReplica"})
    pods = operators.leaderworkerset(lws)
    assert [p.name for p in pods] == ["llama-0", "llama-0-1", "llama-0-2", "llama-1", "llama-1-1", "llama-1-2"]
    assert [p.env_dict["LWS_LEADER_ADDRESS"] for p in pods[2:4]] == ["llama-0.llama-0.ml", "llama-1.llama-1.ml"]


@settings(deadline=None, max_examples=40)
@given(value=st.text(st.characters(exclude_categories=("Cs",)), max_size=12))
def test_a_containers_own_lws_variables_never_win_over_the_controllers(value):
    (lws,) = _objects("lws", 2)
    container = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    container["env"] = [{"name": n, "value": value} for n in operators.LWS_ENV] + [{"name": "MINE", "value": value}]
    pods = operators.leaderworkerset(lws)
    assert [p.env_dict["LWS_WORKER_INDEX"] for p in pods] == ["0", "1"]
    assert {p.env_dict["LWS_LEADER_ADDRESS"] for p in pods} == {"llama-0.llama.ml"}
    assert {p.env_dict["MINE"] for p in pods} == {value}  # the container's other variables are kept as given


def test_jobset_pods_carry_the_controllers_labels_and_their_completion_index():
    pods = operators.pods(_objects("jobset"))
    assert [p.hostname for p in pods] == ["llama-node-0-0", "llama-node-0-1", "llama-node-0-2"]
    assert all(p.name.startswith(p.hostname + "-") and p.name != p.hostname for p in pods)  # generateName
    labels = dict(pods[1].labels)
    assert {k.rsplit("/", 1)[1]: labels[k] for k in labels if k.startswith("jobset.sigs.k8s.io/") and "uid" not in k
            and "key" not in k} == {"jobset-name": "llama", "replicatedjob-name": "node", "restart-attempt": "0",
                                    "replicatedjob-replicas": "1", "global-replicas": "1", "job-index": "0",
                                    "job-global-index": "0", "group-name": "default", "group-replicas": "1",
                                    "job-group-index": "0"}
    assert labels["batch.kubernetes.io/job-completion-index"] == "1"
    assert [p.env_dict["JOB_COMPLETION_INDEX"] for p in pods] == ["0", "1", "2"]
    assert pods[1].dns_names == ("llama-node-0-1.llama", "llama-node-0-1.llama.ml")


def test_the_jobs_global_index_counts_over_the_replicated_jobs_in_spec_order():
    (js,) = _objects("jobset", 1)
    node = js["spec"]["replicatedJobs"][0]
    node["replicas"] = 2
    js["spec"]["replicatedJobs"].append({**copy.deepcopy(node), "name": "eval", "groupName": "eval"})
    pods = operators.jobset(js)
    got = [(p.hostname, dict(p.labels)["jobset.sigs.k8s.io/job-global-index"],
            dict(p.labels)["jobset.sigs.k8s.io/job-group-index"]) for p in pods]
    assert got == [("llama-node-0-0", "0", "0"), ("llama-node-1-0", "1", "1"), ("llama-eval-0-0", "2", "0"),
                   ("llama-eval-1-0", "3", "1")]
    assert {p.env_dict["GLOBAL_REPLICAS"] for p in pods} == {"4"}


def test_a_containers_own_completion_index_variable_is_not_added_twice():
    (js,) = _objects("jobset", 2)
    container = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    container["env"].append({"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
        "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}})
    pods = operators.jobset(js)
    assert [[k for k, _ in p.env].count("JOB_COMPLETION_INDEX") for p in pods] == [1, 1]
    assert [p.env_dict["JOB_COMPLETION_INDEX"] for p in pods] == ["0", "1"]


def test_without_dns_hostnames_no_jobset_pod_has_a_name_others_resolve():
    (js,) = _objects("jobset", 2)
    js["spec"]["network"]["enableDNSHostnames"] = False
    assert {p.dns_names for p in operators.jobset(js)} == {()}


@pytest.mark.parametrize("change, needle", [
    ({"completionMode": "NonIndexed"}, "completionMode 'NonIndexed'"),
    ({"parallelism": 1}, "parallelism 1 is not modelled"),  # pods in waves: a rendezvous would never fill
    ({"completions": None}, "completions None"),
])
def test_the_jobset_model_refuses_a_job_it_does_not_model_in_one_line(change, needle):
    (js,) = _objects("jobset", 2)
    job = js["spec"]["replicatedJobs"][0]["template"]["spec"]
    job.update(change)
    with pytest.raises(InputError, match=needle) as err:
        operators.pods([js])
    assert "\n" not in str(err.value) and "expected an Indexed Job with completions = parallelism" in str(err.value)


# --- --nodes MIN:MAX: the launcher plans MIN:MAX on every modelled pod --------------------
@pytest.mark.parametrize("kind", NODE_RANGE_KINDS)
@pytest.mark.parametrize("rdma", ["none", "hostnetwork"])
def test_an_elastic_jobs_pods_all_plan_min_max_with_restarts(kind, rdma, tmp_path):
    spec = check(JobSpec(kind, "2:3", IMAGE, ("train.py",), name="el", rdma=rdma, gpus_per_node=0))
    pods = operators.pods(kube.objects(spec))
    assert len(pods) == 3  # MAX pods; the scheduler may run MIN of them
    plans = [_pod_plan(p, tmp_path) for p in pods]
    assert {str(p.nnodes) for p in plans} == {"2:3"}
    assert {p.max_restarts for p in plans} == {3}
    assert sorted(p.node_rank for p in plans) == [0, 1, 2]
    assert {str(p.rdzv_endpoint) for p in plans} == {_endpoint(spec)}
    assert all({"--nnodes=2:3", "--max-restarts=3"} <= set(p.torchrun_args) for p in plans)


def test_the_volcano_model_refuses_what_the_admission_webhook_refuses():
    job = kube.objects(check(JobSpec("volcano", "2:3", IMAGE, ("train.py",))))[0]
    job["spec"]["minAvailable"] = 4
    with pytest.raises(InputError, match="minAvailable 4 is above the 3 replicas"):
        operators.pods([job])
    job["spec"]["minAvailable"] = 2
    job["spec"]["tasks"][0]["minAvailable"] = 5
    with pytest.raises(InputError, match="task worker minAvailable 5 is above its 3 replicas"):
        operators.pods([job])


def test_a_container_whose_command_is_not_torchpod_is_refused_by_the_model():
    """The model's pods run the image's torchpod: a manifest whose container runs anything
    else is one line, never modelled as torchpod."""
    job = kube.pytorch_job_fixed(check(JobSpec("kubeflow", 2, IMAGE, ("train.py",))))
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        replica["template"]["spec"]["containers"][0]["command"] = ["python3"]
    with pytest.raises(InputError, match=r"command \['python3'\] is not modelled"):
        operators.pytorchjob(job)
