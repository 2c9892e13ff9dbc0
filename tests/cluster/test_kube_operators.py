"""The real operators on the real control plane (torchpod_toolkit.kube.operators): each
installed once for the module, from its release's CRDs, RBAC and webhooks, its program
built from kube/operators/<name>/. A job of each kind, torchpod's own render where torchpod
renders it, is admitted by the operator's webhooks and makes the children the operator
makes (pods stay Pending: the plane has no nodes); an invalid one is refused by the
webhook or the CRD schema, naming the field."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from torchpod.errors import InputError
from torchpod_toolkit.kube import operators, operatorspecs
from torchpod_toolkit.manifests import admission
from torchpod_toolkit.manifests.render import render
from torchpod_toolkit.manifests.spec import JobSpec

from kube_helpers import Kube, require_operator, until

IMAGE = "registry.example.com/torchpod/pytorch:2.13.0"
TRAIN = ("train.py", "--epochs", "1")


@pytest.fixture(scope="module")
def operator(kube: Kube, tmp_path_factory) -> Iterator[Callable[[str], operatorspecs.Running]]:
    """``operator(name)``: that operator installed on the module's plane (once), stopped
    after the module; fails under CI when its program is not built."""
    running: dict[str, operatorspecs.Running] = {}
    kubectl = operators.Kubectl(kube.plan.bindir / "kubectl", kube.plane.kubeconfig)

    def get(name: str) -> operatorspecs.Running:
        if name not in running:
            for need in operators.operator(name).needs:
                get(need)
            plan = require_operator(name)
            folder = tmp_path_factory.mktemp(f"operator-{name}")
            running[name] = operators.install(operators.operator(name), plan, kubectl, kube.plane, folder,
                                              os.environ)
        return running[name]

    yield get
    for started in reversed(list(running.values())):
        operators.stop(started)
        assert not operators.alive(started), f"{started.name} outlived stop()"


def rendered(scheduler: str, name: str, namespace: str, nodes: int = 2) -> dict[str, Any]:
    """The job object of torchpod's render for ``scheduler`` (the first object of its YAML)."""
    (out,) = [o for o in render(JobSpec(scheduler, nodes, IMAGE, TRAIN, name=name, namespace=namespace,
                                        gpus_per_node=0)) if o.name.endswith(".yaml")]
    docs = [d for d in yaml.safe_load_all(out.text) if d]
    return docs[0]


def objects(kube: Kube, kind: str, namespace: str, selector: str) -> list[dict[str, Any]]:
    found = kube.kubectl("-n", namespace, "get", kind, "-l", selector, "-o", "json").stdout
    return json.loads(found)["items"]


def create(kube: Kube, obj: dict[str, Any], check: bool = True):
    return kube.kubectl("create", "-f", "-", stdin=yaml.safe_dump(obj), check=check)


# --- training-operator: PyTorchJob --------------------------------------------------------

def test_a_rendered_pytorchjob_is_admitted_and_gets_its_pods_and_headless_services(kube, operator):
    operator("training-operator")
    kube.namespace("pt")
    job = rendered("kubeflow", "pt", "pt")
    assert job["kind"] == "PyTorchJob"
    create(kube, job)
    selector = "training.kubeflow.org/job-name=pt"
    pods = until("two pods of the PyTorchJob", lambda: len(objects(kube, "pods", "pt", selector)) == 2
                 and objects(kube, "pods", "pt", selector))
    assert {p["status"].get("phase") for p in pods} == {"Pending"}  # no node yet
    services = until("two Services of the PyTorchJob", lambda: len(objects(kube, "services", "pt", selector)) == 2
                     and objects(kube, "services", "pt", selector))
    assert {s["spec"]["clusterIP"] for s in services} == {"None"}




# --- JobSet ----------------------------------------------------------------------------------

def test_a_rendered_jobset_is_admitted_and_gets_its_child_jobs(kube, operator):
    operator("jobset")
    kube.namespace("js")
    jobset = rendered("jobset", "js", "js")
    assert jobset["kind"] == "JobSet"
    create(kube, jobset)
    jobs = until("the JobSet's child Jobs", lambda: objects(kube, "jobs", "js", "jobset.sigs.k8s.io/jobset-name=js"))
    replicated = {r["name"]: r.get("replicas", 1) for r in jobset["spec"]["replicatedJobs"]}
    assert len(jobs) == sum(replicated.values())




def test_installed_operators_run_as_their_service_accounts(kube, operator):
    running = operator("training-operator")
    config = yaml.safe_load(Path(running.folder / "training-operator.kubeconfig").read_text())
    assert config["users"][0]["name"] == "system:serviceaccount:kubeflow:training-operator"
    hooks = json.loads(kube.kubectl("get", "validatingwebhookconfiguration",
                                    "validator.training-operator.kubeflow.org", "-o", "json").stdout)["webhooks"]
    assert all(h["clientConfig"]["url"].startswith(f"https://127.0.0.1:{running.ports.webhook}/") for h in hooks)


# --- LeaderWorkerSet ------------------------------------------------------------------------

def test_a_rendered_leaderworkerset_is_admitted_and_gets_its_leader_statefulset_and_pods(kube, operator):
    operator("lws")
    kube.namespace("lws")
    lws = rendered("lws", "lws", "lws")
    assert lws["kind"] == "LeaderWorkerSet"
    create(kube, lws)
    selector = "leaderworkerset.sigs.k8s.io/name=lws"
    sets = until("the leader StatefulSet", lambda: objects(kube, "statefulsets", "lws", selector))
    assert "lws" in {s["metadata"]["name"] for s in sets}
    leaders = until("the leader pods", lambda: objects(kube, "pods", "lws", f"{selector},"
                                                       "leaderworkerset.sigs.k8s.io/worker-index=0"))
    assert len(leaders) == lws["spec"].get("replicas", 1)




# --- Kubeflow Trainer v2: TrainJob ---------------------------------------------------------

def test_a_rendered_trainjob_is_admitted_by_trainers_webhook(kube, operator):
    operator("trainer")
    kube.namespace("tj-render")
    job = rendered("trainer", "tj-render", "tj-render")
    result = create(kube, job, check=False)
    assert result.returncode == 0, result.stderr




def test_a_trainjob_gets_its_jobset_and_the_jobsets_child_jobs(kube, operator):
    """torchpod's TrainJob as rendered: the Trainer makes the JobSet, the JobSet operator its Jobs."""
    operator("trainer")
    kube.namespace("tj")
    job = rendered("trainer", "tj", "tj")
    assert job["kind"] == "TrainJob"
    create(kube, job)
    jobset = until("the TrainJob's JobSet", lambda: kube.kubectl("-n", "tj", "get", "jobsets.jobset.x-k8s.io", "tj",
                                                                 "-o", "json", check=False).stdout)
    owners = json.loads(jobset)["metadata"]["ownerReferences"]
    assert [(o["kind"], o["name"]) for o in owners] == [("TrainJob", "tj")]
    until("the JobSet's child Jobs", lambda: objects(kube, "jobs", "tj", "jobset.sigs.k8s.io/jobset-name=tj"))




# --- Volcano ---------------------------------------------------------------------------------

def _podgroups_of(kube: Kube, namespace: str, job: str) -> list[dict[str, Any]]:
    groups = json.loads(kube.kubectl("-n", namespace, "get", "podgroups.scheduling.volcano.sh", "-o", "json").stdout)
    return [g for g in groups["items"] if [o["name"] for o in g["metadata"].get("ownerReferences", [])] == [job]]


def test_a_rendered_volcano_job_is_admitted_and_gets_its_podgroup(kube, operator):
    operator("volcano")
    kube.namespace("vc")
    job = rendered("volcano", "vc", "vc")
    assert job["kind"] == "Job" and job["apiVersion"] == "batch.volcano.sh/v1alpha1"
    create(kube, job)
    (group,) = until("the Volcano Job's PodGroup", lambda: _podgroups_of(kube, "vc", "vc"))
    assert group["spec"]["minMember"] == job["spec"]["minAvailable"]
    # vc-scheduler holds the gang back: no node offers its resources, so the PodGroup stays
    # Pending and the job's pods wait for it to be enqueued
    (group,) = until("vc-scheduler's verdict on the PodGroup",
                     lambda: [g for g in _podgroups_of(kube, "vc", "vc")
                              if any(c["type"] == "Unschedulable" for c in g.get("status", {}).get("conditions", []))])
    assert group["status"]["phase"] == "Pending"
    assert "NotEnoughResources" in {c.get("reason") for c in group["status"]["conditions"]}
    # the admission's mutation ran: the job carries the queue it defaults to
    admitted = json.loads(kube.kubectl("-n", "vc", "get", "jobs.batch.volcano.sh", "vc", "-o", "json").stdout)
    assert admitted["spec"]["queue"] == "default"


# --- what each operator refuses ----------------------------------------------------------------

def _containers_renamed(job: dict[str, Any]) -> None:
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        for container in spec["template"]["spec"]["containers"]:
            container["name"] = "trainer"


def _first_replicated_job_named(job: dict[str, Any]) -> None:
    job["spec"]["replicatedJobs"][0]["name"] = "Not_A_DNS_Label"


def _size_zero(job: dict[str, Any]) -> None:
    job["spec"]["leaderWorkerTemplate"]["size"] = 0


def _managers_without_domain(job: dict[str, Any]) -> None:
    for patch in job["spec"]["runtimePatches"]:
        patch["manager"] = "torchpod"


def _unknown_runtime(job: dict[str, Any]) -> None:
    job["spec"]["runtimeRef"]["name"] = "no-such-runtime"


def _more_than_its_replicas(job: dict[str, Any]) -> None:
    job["spec"]["minAvailable"] = 5


def _a_torch_plugin_variable(job: dict[str, Any]) -> None:
    job["spec"]["trainer"]["env"] = [*job["spec"]["trainer"].get("env", []), {"name": "PET_NNODES", "value": "9"}]


# (operator, kind, how torchpod's render is spoilt, what the refusal names)
REFUSED = {
    "pytorchjob-without-its-pytorch-container": (
        "training-operator", "kubeflow", _containers_renamed,
        ("validator.pytorchjob.training-operator.kubeflow.org", "spec.pytorchReplicaSpecs", "containers")),
    "jobset-replicated-job-not-a-dns-label": ("jobset", "jobset", _first_replicated_job_named, ("replicatedJobs",)),
    "leaderworkerset-of-size-zero": ("lws", "lws", _size_zero, ("spec.leaderWorkerTemplate.size",)),
    # Trainer v2.3.0 checks each runtime patch's manager with IsDomainPrefixedPath
    # (pkg/runtime/framework/plugins/jobset/jobset.go): torchpod's render once named it
    # "torchpod", and the webhook refused the job; the render's unit test holds the same rule
    "trainjob-patch-manager-without-a-domain": (
        "trainer", "trainer", _managers_without_domain,
        ("spec.runtimePatches.manager", "must be a domain-prefixed path")),
    # the field as the webhook spells it (its Go name): spec.RuntimeRef
    "trainjob-of-an-unknown-runtime": ("trainer", "trainer", _unknown_runtime, ("spec.RuntimeRef", "no-such-runtime")),
    "volcano-job-asking-more-than-its-replicas": ("volcano", "volcano", _more_than_its_replicas, ("minAvailable",)),
    # Trainer v2.3.0's torch plugin refuses a variable it sets (torch.go Validate)
    "trainjob-setting-a-torch-plugin-variable": ("trainer", "trainer", _a_torch_plugin_variable, ("PET_NNODES",)),
}
# the refusals torchpod_toolkit.manifests.admission also makes before the operator model
# (`invoke demo --manifest` runs no plane): held here to the real webhook's
ADMISSION = ("volcano-job-asking-more-than-its-replicas", "trainjob-setting-a-torch-plugin-variable")


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_spoilt_render_is_refused_by_the_operator_naming_the_field(kube, operator, case):
    """torchpod's own render, one field spoilt, is refused at create by the operator's webhook
    or CRD schema, and the refusal names what was wrong; the render unspoilt is admitted
    (each kind's test above). Where torchpod_toolkit.manifests.admission makes the same
    refusal without a plane, it refuses the same job naming the same field, and passes the
    render unspoilt."""
    name, kind, spoil, named = REFUSED[case]
    operator(name)
    namespace = f"bad-{list(REFUSED).index(case)}"
    kube.namespace(namespace)
    job = rendered(kind, namespace, namespace)
    spoil(job)
    result = create(kube, job, check=False)
    assert result.returncode != 0, result.stdout
    assert all(n in result.stderr for n in named), result.stderr
    if case in ADMISSION:
        with pytest.raises(InputError) as caught:
            admission.admitted(job)
        assert all(n in str(caught.value) for n in named), str(caught.value)
        admission.admitted(rendered(kind, namespace, namespace))  # the render unspoilt passes
