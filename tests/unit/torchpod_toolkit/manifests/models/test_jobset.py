"""torchpod_toolkit.manifests.models.jobset: the pods of each Indexed Job of a JobSet, with the
labels, hostnames and completion index the JobSet and Job controllers give them."""

from __future__ import annotations

import copy

import pytest

from torchpod.errors import InputError
from torchpod_toolkit.manifests import kube, operators
from torchpod_toolkit.manifests.models.jobset import jobset
from torchpod_toolkit.manifests.spec import JobSpec, check

from manifest_cases import IMAGE


# --- JobSet: the pods its controller and Kubernetes' Job controller make -----------------
def _objects(kind: str, nodes: int = 3, **kw):
    return kube.objects(check(JobSpec(kind, nodes, IMAGE, ("train.py",), name="llama", namespace="ml",
                                      gpus_per_node=0, **kw)))


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
    pods = jobset(js)
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
    pods = jobset(js)
    assert [[k for k, _ in p.env].count("JOB_COMPLETION_INDEX") for p in pods] == [1, 1]
    assert [p.env_dict["JOB_COMPLETION_INDEX"] for p in pods] == ["0", "1"]


def test_without_dns_hostnames_no_jobset_pod_has_a_name_others_resolve():
    (js,) = _objects("jobset", 2)
    js["spec"]["network"]["enableDNSHostnames"] = False
    assert {p.dns_names for p in jobset(js)} == {()}


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
