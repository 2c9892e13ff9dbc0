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

from torchpod.torchrun_flags import split_command_line
from torchpod_toolkit.manifests import jobs, kube, operators, podtemplate
from torchpod_toolkit.manifests.spec import KUBE, MNNVL_KINDS, JobSpec, check

from manifest_cases import IMAGE, KUBE_SPECS, documents, spec_id
from paths import ROOT

REFERENCE = ROOT / "tests" / "reference"
K8S_VERSION = "1.33.0"  # the Kubernetes version core objects are validated for (docs/manifests.md)
CRDS = {
    ("batch.volcano.sh/v1alpha1", "Job"): "crds/batch.volcano.sh_jobs.yaml",
    ("kubeflow.org/v1", "PyTorchJob"): "crds/kubeflow.org_pytorchjobs.yaml",
    ("trainer.kubeflow.org/v1alpha1", "TrainJob"): "crds/trainer.kubeflow.org_trainjobs.yaml",
    ("resource.nvidia.com/v1beta1", "ComputeDomain"): "crds/resource.nvidia.com_computedomains.yaml",
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
    assert [d["kind"] for d in crs].count("ComputeDomain") == spec.mnnvl and len(crs) == 1 + spec.mnnvl
    for cr in crs:
        jsonschema.validate(cr, _crd_schema((cr["apiVersion"], cr["kind"])))


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


# --- --mnnvl (GB200): the ComputeDomain and every pod's claim on its channel ---------------
MNNVL_SPECS = [s for s in KUBE_SPECS if s.mnnvl]


def test_every_kind_that_can_carry_mnnvl_is_rendered_with_it():
    assert sorted({s.scheduler for s in MNNVL_SPECS}) == sorted(MNNVL_KINDS)


@pytest.mark.parametrize("spec", MNNVL_SPECS, ids=spec_id)
def test_mnnvl_applies_the_compute_domain_first_and_every_pod_claims_its_channel(spec):
    docs = documents(spec)
    domain = docs[0]
    assert (domain["kind"], domain["metadata"]) == (
        "ComputeDomain", {"name": f"{spec.name}-compute-domain", "namespace": spec.namespace})
    assert domain["spec"] == {"numNodes": spec.nodes,
                              "channel": {"resourceClaimTemplate": {"name": f"{spec.name}-compute-domain-channel"}}}
    pods = [p["spec"] for d in docs[1:] for p in _pod_templates(d)]
    assert pods and all(p["resourceClaims"] == [{"name": podtemplate.MNNVL_CLAIM, "resourceClaimTemplateName":
                                                 f"{spec.name}-compute-domain-channel"}] for p in pods)
    for c in (c for p in pods for c in p["containers"]):
        assert c["resources"]["claims"] == [{"name": podtemplate.MNNVL_CLAIM}]
        assert c["resources"]["limits"]["nvidia.com/gpu"] == str(spec.gpus_per_node)  # GPUs asked for as before


@pytest.mark.parametrize("spec", MNNVL_SPECS, ids=spec_id)
def test_the_job_crd_checks_the_pods_claims(spec):
    job = documents(spec)[1]
    pod = _pod_templates(job)[0]["spec"]
    pod["resourceClaims"][0]["resourceClaimTemplate"] = pod["resourceClaims"][0].pop("resourceClaimTemplateName")
    with pytest.raises(jsonschema.ValidationError, match="resourceClaimTemplate"):
        jsonschema.validate(job, _crd_schema((job["apiVersion"], job["kind"])))


def test_without_mnnvl_nothing_is_claimed():
    for spec in (s for s in KUBE_SPECS if not s.mnnvl):
        docs = documents(spec)
        assert "ComputeDomain" not in [d["kind"] for d in docs]
        assert not [p for d in docs for p in _pod_templates(d) if "resourceClaims" in p["spec"]]


@pytest.mark.parametrize("change, needle", [
    (lambda d: d["spec"].update(numNode=2), "numNode"),
    (lambda d: d["spec"].pop("numNodes"), "numNodes"),
    (lambda d: d["spec"]["channel"].update(allocationMode="Some"), "Some"),
    (lambda d: d["spec"]["channel"].pop("resourceClaimTemplate"), "resourceClaimTemplate"),
], ids=["misspelt", "no numNodes", "bad allocationMode", "no template"])
def test_the_compute_domain_crd_refuses_a_broken_domain(change, needle):
    domain = documents(JobSpec("jobset", 2, IMAGE, ("t.py",), gpus_per_node=4, mnnvl=True))[0]
    jsonschema.validate(domain, _crd_schema(("resource.nvidia.com/v1beta1", "ComputeDomain")))
    change(domain)
    with pytest.raises(jsonschema.ValidationError, match=needle):
        jsonschema.validate(domain, _crd_schema(("resource.nvidia.com/v1beta1", "ComputeDomain")))


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


@pytest.mark.parametrize("kind", jobs.KUBE)
def test_every_pod_of_a_preflight_job_runs_the_preflight_module(kind):
    spec = check(JobSpec(kind, 3, IMAGE, ("--floor-gbps", "50"), workload="preflight"))
    for pod in operators.pods(kube.objects(spec)):
        assert pod.args[0] == "run"
        inv = split_command_line(list(pod.args[1:]))
        assert "--module" in inv.passthrough
        assert (inv.script, inv.script_args) == ("torchpod.preflight", ("--floor-gbps", "50"))


@pytest.mark.parametrize("kind", [k for k in KUBE if k != "runai"])
def test_the_sites_pod_fields_and_the_jobs_env_reach_every_pod(kind):
    spec = next(s for s in KUBE_SPECS if s.scheduler == kind and s.name == "site")
    job = documents(spec)[-1]
    pods = [t["spec"] for t in (_pod_templates(job) or [])]
    if kind == "trainer":  # the TrainJob's patch of the runtime's pod template, and its trainer's env
        patch = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
        pods = [patch["template"]["spec"]["template"]["spec"]]
        envs = [job["spec"]["trainer"]["env"]]
    else:
        envs = [p["containers"][0]["env"] for p in pods]
    assert pods and all(p["serviceAccountName"] == "trainer" and p["imagePullSecrets"] == [{"name": "regcred"}]
                        for p in pods)
    assert all(p.get("priorityClassName") == ("training-high" if kind != "trainer" else None) for p in pods)
    if job["apiVersion"].startswith("batch.volcano.sh"):  # the Job's own, which vc-scheduler orders jobs by
        assert job["spec"]["priorityClassName"] == "training-high"
    want = [{"name": "NCCL_DEBUG", "value": "INFO"}, {"name": "NCCL_IB_HCA", "value": "mlx5_0,mlx5_1"}]
    assert envs and all(e[:2] == want for e in envs), envs


@pytest.mark.parametrize("kind", [k for k in KUBE if k != "runai"])
def test_volumes_selectors_and_tolerations_reach_every_pod(kind):
    spec = next(s for s in KUBE_SPECS if s.scheduler == kind and s.name == "site")
    job = documents(spec)[-1]
    if kind == "trainer":
        patch = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
        pods = [patch["template"]["spec"]["template"]["spec"]]
    else:
        pods = [t["spec"] for t in _pod_templates(job)]
    for pod in pods:
        sources = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["mountPath"]: m for m in pod["containers"][0]["volumeMounts"]}
        assert sources[mounts["/data"]["name"]]["hostPath"] == {"path": "/scratch/datasets", "type": "Directory"}
        assert sources[mounts["/ckpt"]["name"]]["persistentVolumeClaim"] == {"claimName": "checkpoints"}
        assert sources[mounts["/workspace"]["name"]]["configMap"] == {"name": "train-code"}
        assert mounts["/data"]["readOnly"] and mounts["/workspace"]["readOnly"] and "readOnly" not in mounts["/ckpt"]
        assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
        assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                                      {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoExecute"}]
        if kind != "trainer":
            assert pod["containers"][0]["workingDir"] == "/workspace"


# Trainer's webhook (trainer v2.3.0, pkg/runtime/framework/plugins/jobset/jobset.go) checks
# each runtime patch's manager with apimachinery's IsDomainPrefixedPath (k8s.io/apimachinery
# v0.37.2, pkg/util/validation/validation.go): an RFC 1123 subdomain, "/", then httpPathFmt.
_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_HTTP_PATH = r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+"


def _domain_prefixed_path(text: str) -> bool:
    import re

    host, slash, path = text.partition("/")
    return (bool(slash) and 0 < len(host) <= 253 and re.fullmatch(_SUBDOMAIN, host, re.ASCII) is not None
            and re.fullmatch(_HTTP_PATH, path, re.ASCII) is not None)


@pytest.mark.parametrize("text, ok", [("torchpod", False), ("kueue.x-k8s.io/manager", True), ("/x", False),
                                      ("Acme.io/x", False), ("acme.io/", False), ("acme.io/a b", False)])
def test_the_domain_prefixed_path_check_is_apimachinerys(text, ok):
    assert _domain_prefixed_path(text) is ok


def test_every_runtime_patch_of_a_trainjob_names_a_domain_prefixed_manager():
    for nodes in (1, 2, 3):
        managers = [patch["manager"] for patch in _job("trainer", nodes)["spec"]["runtimePatches"]]
        assert managers and all(_domain_prefixed_path(m) for m in managers), managers
