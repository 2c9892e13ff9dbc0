"""torchpod_toolkit.manifests.kube: every Kubernetes object it writes passes the Kubernetes
schema strictly and the operators' CRDs made strict (an API server would prune a misspelt
field silently; these tests refuse it), and site directories mount read-only."""

from __future__ import annotations

import copy
from functools import lru_cache

import jsonschema
import kubernetes_validate
import pytest
import yaml

from torchpod_toolkit.manifests.spec import JobSpec

from manifest_cases import IMAGE, KUBE_SPECS, documents, spec_id
from paths import ROOT

REFERENCE = ROOT / "tests" / "reference"
K8S_VERSION = "1.33.0"  # the Kubernetes version core objects are validated for (docs/manifests.md)
CRDS = {
    ("batch.volcano.sh/v1alpha1", "Job"): "crds/batch.volcano.sh_jobs.yaml",
    ("kubeflow.org/v1", "PyTorchJob"): "crds/kubeflow.org_pytorchjobs.yaml",
    ("trainer.kubeflow.org/v1alpha1", "TrainJob"): "crds/trainer.kubeflow.org_trainjobs.yaml",
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"): "crds/leaderworkerset.x-k8s.io_leaderworkersets.yaml",
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): "crds/jobset.x-k8s.io_jobsets.yaml",
}


@lru_cache(maxsize=None)
def _crd_schema(key) -> dict:
    crd = yaml.safe_load((REFERENCE / CRDS[key]).read_text())
    version = key[0].split("/")[1]
    schema = next(v for v in crd["spec"]["versions"] if v["name"] == version)["schema"]["openAPIV3Schema"]
    return _strict(copy.deepcopy(schema))


def _strict(node):
    """An API server prunes unknown fields; the tests reject them (reference README)."""
    if isinstance(node, dict):
        if ("properties" in node and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")):
            node["additionalProperties"] = False
        for v in node.values():
            _strict(v)
    elif isinstance(node, list):
        for v in node:
            _strict(v)
    return node


def _pod_templates(doc):
    """Pod specs inside a custom resource, wrapped as Pods for the core schema."""
    spec = doc["spec"]
    if doc["kind"] == "Job":
        templates = [t["template"] for t in spec["tasks"]]
    elif doc["kind"] == "PyTorchJob":
        templates = [r["template"] for r in spec["pytorchReplicaSpecs"].values()]
    elif doc["kind"] == "LeaderWorkerSet":
        lwt = spec["leaderWorkerTemplate"]
        templates = [lwt["workerTemplate"]] + ([lwt["leaderTemplate"]] if "leaderTemplate" in lwt else [])
    elif doc["kind"] == "JobSet":
        templates = [r["template"]["spec"]["template"] for r in spec["replicatedJobs"]]
    else:
        return []
    return [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "t", **(t.get("metadata") or {})},
             "spec": t["spec"]} for t in templates]


@pytest.mark.parametrize("spec", KUBE_SPECS, ids=spec_id)
def test_core_objects_and_pod_templates_pass_strict_kubernetes_schema(spec):
    for doc in documents(spec):
        core = [doc] if doc["apiVersion"] == "v1" else _pod_templates(doc)
        for obj in core:
            kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


@pytest.mark.parametrize("spec", KUBE_SPECS, ids=spec_id)
def test_custom_resources_pass_their_crd_schema_strictly(spec):
    crs = [d for d in documents(spec) if (d["apiVersion"], d["kind"]) in CRDS]
    assert len(crs) == 1
    jsonschema.validate(crs[0], _crd_schema((crs[0]["apiVersion"], crs[0]["kind"])))


@pytest.mark.parametrize("scheduler, path, field", [
    ("volcano", ["spec"], "minAvaliable"),
    ("kubeflow", ["spec"], "nprocPerNod"),
    ("trainer", ["spec", "trainer"], "numNode"),
    ("lws", ["spec", "leaderWorkerTemplate"], "sizes"),
    ("jobset", ["spec", "network"], "enableDNSHostname"),
])
def test_strict_crd_schema_rejects_a_misspelt_field(scheduler, path, field):
    doc = next(d for d in documents(JobSpec(scheduler, 2, IMAGE, ("t.py",))) if d["apiVersion"] != "v1")
    target = doc
    for key in path:
        target = target[key]
    target[field] = 1
    with pytest.raises(jsonschema.ValidationError, match=field):
        jsonschema.validate(doc, _crd_schema((doc["apiVersion"], doc["kind"])))


def test_strict_core_schema_rejects_a_misspelt_pod_field():
    doc = documents(JobSpec("volcano", 2, IMAGE, ("t.py",)))[0]
    pod = _pod_templates(doc)[0]
    pod["spec"]["containers"][0]["volumeMount"] = []
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod, K8S_VERSION, strict=True)


def test_an_efa_pod_mounts_the_efa_installers_tree_read_only():
    docs = documents(JobSpec("kubeflow", 2, IMAGE, ("t.py",), preset="aws-p5", rdma="device-plugin",
                         rdma_resource="vpc.amazonaws.com/efa"))
    pod = docs[0]["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert {"name": "site-0", "hostPath": {"path": "/opt/amazon", "type": "Directory"}} in pod["volumes"]
    assert {"name": "site-0", "mountPath": "/opt/amazon", "readOnly": True} in pod["containers"][0]["volumeMounts"]


# --- --nodes MIN:MAX ---------------------------------------------------------------------
def _job(scheduler: str, nodes) -> dict:
    return next(d for d in documents(JobSpec(scheduler, nodes, IMAGE, ("t.py",))) if d["apiVersion"] != "v1")


def test_kubeflow_elastic_renders_min_and_max_replicas_and_max_pods():
    spec = _job("kubeflow-elastic", "2:3")["spec"]
    assert {k: spec["elasticPolicy"][k] for k in ("minReplicas", "maxReplicas", "maxRestarts")} == {
        "minReplicas": 2, "maxReplicas": 3, "maxRestarts": 3}
    assert spec["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3
    fixed = _job("kubeflow-elastic", "3")["spec"]["elasticPolicy"]
    assert (fixed["minReplicas"], fixed["maxReplicas"]) == (3, 3)


def test_volcano_with_a_range_gangs_min_runs_max_and_tells_the_launcher():
    spec = _job("volcano", "2:3")["spec"]
    (task,) = spec["tasks"]
    assert (spec["minAvailable"], task["minAvailable"], task["replicas"]) == (2, 2, 3)
    assert "policies" not in spec  # a lost pod must not restart the other two (RestartJob)
    env = task["template"]["spec"]["containers"][0]["env"]
    assert env == [{"name": "PET_NNODES", "value": "2:3"}, {"name": "PET_MAX_RESTARTS", "value": "3"}]


def test_a_fixed_size_volcano_job_is_unchanged_by_the_range_code():
    spec = _job("volcano", "3")["spec"]
    (task,) = spec["tasks"]
    assert spec["minAvailable"] == 3 and "minAvailable" not in task
    assert {p["action"] for p in spec["policies"]} == {"RestartJob"}
    assert "env" not in task["template"]["spec"]["containers"][0]
