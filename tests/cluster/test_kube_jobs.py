"""Every Kubernetes kind torchpod renders, end to end on the real control plane: the
manifest as `invoke manifests` writes it is applied with kubectl into a namespace that
enforces the Pod Security level its header states; the real operator (installed once for
the module, torchpod_toolkit.kube.operators) makes the pods; the real scheduler (Volcano's
vc-scheduler for a Volcano Job) binds them to the kubelet stand-in's three nodes
(torchpod_toolkit.kube.kubelet), which runs them as containers of the cluster tier's image;
the launcher in each reads what the operator gave its pod and runs torchrun. Each job is
waited for, bounded, until it reaches its own success condition, and its pods' logs show
one group of the expected world size.

Without the control plane's or an operator's programs the tests fail under CI
(TORCHPOD_REQUIRE_TOOLS=1) and skip elsewhere, naming `invoke kube.build`; without the
image (``cluster_image``) they fail."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import pytest

from torchpod_toolkit.cluster.runner import parse_results
from torchpod_toolkit.kube import kubelet as kubelet_mod
from torchpod_toolkit.kube import operators, podargs
from torchpod_toolkit.manifests.render import render
from torchpod_toolkit.manifests.spec import JobSpec

from cluster_helpers import EXAMPLES, LABEL, label_value
from kube_helpers import Kube, require_operator, until

NODES = 3
OPERATORS = ("training-operator", "jobset", "lws", "trainer", "volcano")
WAIT = 180.0  # seconds a job has to succeed: pods start in seconds, the check trains in a few
REFUSED = ("FailedCreate", "FailedCreatePod")  # a controller's event: the API refused a pod it made
NO_IMAGE = "is not on this machine"  # the stand-in's word for an image it does not have (podworker)
LEVEL = re.compile(r"^# Pod Security: namespace level '([a-z]+)'", re.MULTILINE)


@dataclass
class Cluster:
    """The module's plane with its kubelet stand-in and every operator installed."""

    kube: Kube
    kubelet: kubelet_mod.Kubelet
    docker: Any
    image: str
    folder: Path


@pytest.fixture(scope="module")
def cluster(kube, docker_client, cluster_image, session_id, tmp_path_factory) -> Iterator[Cluster]:
    """Three nodes and the five operators on the module's plane, stopped after the module."""
    kubectl = operators.Kubectl(kube.plan.bindir / "kubectl", kube.plane.kubeconfig)
    running: list[operators.Running] = []
    nodes = kubelet_mod.Kubelet(kube.plane, docker_client, nodes=NODES, labels={LABEL: label_value(session_id)},
                                version=kube.plan.kubernetes).start()
    try:
        for name in OPERATORS:
            plan = require_operator(name)
            folder = tmp_path_factory.mktemp(f"operator-{name}")
            running.append(operators.install(operators.operator(name), plan, kubectl, kube.plane, folder, os.environ,
                                             init_image=cluster_image))
        until("every node Ready", lambda: all(_ready(kube, n) for n in nodes.names))
        yield Cluster(kube, nodes, docker_client, cluster_image, tmp_path_factory.mktemp("jobs"))
    finally:
        nodes.stop()
        for started in reversed(running):
            operators.stop(started)


def _ready(kube: Kube, name: str) -> bool:
    found = kube.kubectl("get", "node", name, "-o", "json", check=False)
    if found.returncode != 0:
        return False
    return any(c["type"] == "Ready" and c["status"] == "True"
               for c in json.loads(found.stdout)["status"].get("conditions") or [])


# --- one job: render, apply, wait, read ---------------------------------------------------------

@dataclass(frozen=True)
class Ran:
    """A pod container's run as docker kept it: its pod, attempt name, exit code and log."""

    pod: str
    container: str
    code: int | None
    log: str


def submit(cluster: Cluster, scheduler: str, name: str, nodes: int, **options: Any) -> dict[str, Any]:
    """torchpod's render for ``scheduler`` written to a file and applied as written, in a new
    namespace ``name`` labelled with the Pod Security level the render's header states."""
    check = (f"{EXAMPLES}/allreduce_check.py", "--expect-world", str(nodes), "--expect-nodes", str(nodes))
    (out,) = [o for o in render(JobSpec(scheduler, nodes, cluster.image, check, name=name, namespace=name,
                                        gpus_per_node=0, **options)) if o.name.endswith(".yaml")]
    path = cluster.folder / out.name
    path.write_text(out.text)
    level = LEVEL.search(out.text)
    assert level, f"the render names no Pod Security level:\n{out.text[:600]}"
    cluster.kube.namespace(name)
    cluster.kube.kubectl("label", "namespace", name, f"pod-security.kubernetes.io/enforce={level.group(1)}")
    cluster.kube.kubectl("apply", "--server-side", "-f", str(path))
    return {"path": path, "level": level.group(1)}


def init_containers(cluster: Cluster, namespace: str) -> set[tuple[str, str]]:
    """(pod, container) of every init container the pods of ``namespace`` declare (an
    operator adds its own: training-operator's init-pytorch)."""
    found = cluster.kube.kubectl("-n", namespace, "get", "pods", "-o", "json", check=False)
    pods = json.loads(found.stdout).get("items", []) if found.returncode == 0 else []
    return {(pod["metadata"]["name"], c["name"]) for pod in pods for c in pod["spec"].get("initContainers") or ()}


def runs(cluster: Cluster, namespace: str) -> list[Ran]:
    """Every app container the stand-in ran for the pods of ``namespace`` (each attempt, those it
    has removed since included), with its log."""
    found = cluster.docker.containers.list(all=True, filters={"label": [
        f"{kubelet_mod.LABEL}={cluster.kubelet.id}", f"io.kubernetes.pod.namespace={namespace}"]},
        ignore_removed=True)  # one removed between the listing and its inspection is in kubelet.ended
    out = []
    init = init_containers(cluster, namespace)
    for container in found:
        labels = container.labels
        name = labels.get("io.kubernetes.container.name")
        if name == podargs.SANDBOX or (labels.get("io.kubernetes.pod.name"), name) in init:
            continue
        state = container.attrs["State"]
        code = None if state.get("Running") or state.get("Status") == "created" else state.get("ExitCode")
        try:  # the stand-in may remove it meanwhile; then it is in kubelet.ended, read below
            log = container.logs().decode("utf-8", "replace")
        except docker.errors.NotFound:
            continue
        out.append(Ran(labels.get("io.kubernetes.pod.name", "?"), container.name, code, log))
    # and those already removed: a restart's previous attempt, a pod an LWS recreated with its group
    seen = {r.container for r in out}
    out += [Ran(e.pod, e.attempt, e.code, e.log) for e in list(cluster.kubelet.ended)
            if e.namespace == namespace and e.attempt not in seen and (e.pod, e.container) not in init]
    return sorted(out, key=lambda r: (r.pod, r.container))


def first_success(ran: list[Ran]) -> dict[str, Ran]:
    """Each pod's first container attempt that exited 0 (a pod restarted Always runs again)."""
    out: dict[str, Ran] = {}
    for r in sorted(ran, key=lambda r: (r.pod, int(r.container.rsplit("_", 1)[-1]))):
        if r.code == 0:
            out.setdefault(r.pod, r)
    return out


def report(cluster: Cluster, namespace: str, kind: str, name: str) -> str:
    """What a failure shows: the job's status, the pods' phases, every container's log and
    what the stand-in met."""
    job = cluster.kube.kubectl("-n", namespace, "get", kind, name, "-o", "json", check=False).stdout
    status = json.loads(job).get("status") if job else None
    pods = cluster.kube.kubectl("-n", namespace, "get", "pods", "-o", "wide", check=False).stdout
    logs = "\n".join(f"--- {r.pod} ({r.container}, exit {r.code})\n{r.log[-3000:]}" for r in runs(cluster, namespace))
    return (f"{kind} {namespace}/{name} status: {json.dumps(status)[:3000]}\npods:\n{pods}\n{logs}\n"
            f"the stand-in met: {cluster.kubelet.errors[-10:]}")


def condition(cluster: Cluster, namespace: str, kind: str, name: str, wanted: str) -> Callable[[], bool]:
    """Whether the job object carries condition ``wanted`` with status True."""
    def probe() -> bool:
        found = cluster.kube.kubectl("-n", namespace, "get", kind, name, "-o", "json", check=False)
        if found.returncode != 0:
            return False
        conditions = json.loads(found.stdout).get("status", {}).get("conditions") or []
        return any(c.get("type") == wanted and c.get("status") == "True" for c in conditions)
    return probe


def refusals(cluster: Cluster, namespace: str) -> list[str]:
    """What no wait mends: the events in which a controller says the API refused a pod it
    made, and a container whose image the stand-in does not have (it pulls nothing)."""
    found = cluster.kube.kubectl("-n", namespace, "get", "events", "-o", "json", check=False)
    items = json.loads(found.stdout).get("items", []) if found.returncode == 0 else []
    out = [f"{e.get('reason')}: {e.get('message')}" for e in items if e.get("reason") in REFUSED]
    found = cluster.kube.kubectl("-n", namespace, "get", "pods", "-o", "json", check=False)
    for pod in json.loads(found.stdout).get("items", []) if found.returncode == 0 else []:
        status = pod.get("status") or {}
        for c in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
            waiting = (c.get("state") or {}).get("waiting") or {}
            if NO_IMAGE in str(waiting.get("message", "")):
                out.append(f"pod {pod['metadata']['name']} container {c.get('name')}: {waiting['message']}")
    return out


def wait(cluster: Cluster, namespace: str, kind: str, name: str, what: str, probe: Callable[[], bool]) -> None:
    """``probe()`` true within WAIT seconds, else the test fails with everything it can show."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if probe():
            return
        refused = refusals(cluster, namespace)
        if refused:
            pytest.fail(f"{what} never comes: a pod was refused: {refused[0]}\n"
                        f"{report(cluster, namespace, kind, name)}")
        time.sleep(1.0)
    pytest.fail(f"{what} not reached within {WAIT:.0f} s\n{report(cluster, namespace, kind, name)}")


def assert_one_group(cluster: Cluster, namespace: str, world: int, nodes: int) -> list[dict[str, Any]]:
    """The containers that exited 0 reported every rank ok, in one group of ``world`` ranks
    on ``nodes`` distinct hosts, under one rendezvous id."""
    done = list(first_success(runs(cluster, namespace)).values())
    text = "\n".join(f"--- {r.pod} ({r.container}, exit {r.code})\n{r.log[-3000:]}" for r in runs(cluster, namespace))
    results = [res for r in done for res in parse_results(r.log) if res.get("workload") == "allreduce_check"]
    assert sorted(r["rank"] for r in results) == list(range(world)), text[-12000:]
    assert all(r["ok"] for r in results), results
    assert {r["world_size"] for r in results} == {world}, results
    assert all(r["nodes"] == nodes and len(set(r["hosts"])) == nodes for r in results), results
    assert len({r["run_id"] for r in results}) == 1, "ranks saw different rendezvous ids"
    assert len({r.pod for r in done}) == nodes, text[-12000:]
    return results


# --- the kinds ------------------------------------------------------------------------------------

# training-operator v1.8.1 gives each Worker pod of a job with a Master its init container
# init-pytorch (pkg/controller.v1/pytorch/initcontainer.go), which waits until the Master's
# name resolves; its default image, alpine:3.10, comes from Docker Hub, which this machine
# cannot reach, so the operator is installed as such a site installs it: its own image
# (torchpod's) and template (operators.INIT_CONTAINERS: `getent hosts` for nslookup). The
# render's Pod Security level counts that container ('baseline', so the namespace admits it).
def test_a_pytorchjob_trains_to_succeeded(cluster):
    """training-operator v1.8.1: the Master and Worker pods get MASTER_ADDR/PORT, WORLD_SIZE,
    RANK and PET_* (pkg/controller.v1/pytorch/envvar.go); the job's condition Succeeded
    follows the Master's success (its default success policy)."""
    submit(cluster, "kubeflow", "pt", 2)
    wait(cluster, "pt", "pytorchjobs.kubeflow.org", "pt", "PyTorchJob condition Succeeded",
         condition(cluster, "pt", "pytorchjobs.kubeflow.org", "pt", "Succeeded"))
    assert_one_group(cluster, "pt", world=2, nodes=2)
    # the Worker waited for the Master's name in the operator's own init container
    inits = cluster.docker.containers.list(all=True, filters={"label": [
        f"{kubelet_mod.LABEL}={cluster.kubelet.id}", "io.kubernetes.pod.namespace=pt",
        "io.kubernetes.container.name=init-pytorch"]})
    assert [c.labels["io.kubernetes.pod.name"] for c in inits] == ["pt-worker-0"]
    assert inits[0].attrs["State"]["ExitCode"] == 0 and "pt-master-0" in inits[0].logs().decode()


def phase(cluster: Cluster, namespace: str, kind: str, name: str, wanted: str) -> Callable[[], bool]:
    """Whether the job object's status.state.phase (a Volcano Job's) is ``wanted``."""
    def probe() -> bool:
        found = cluster.kube.kubectl("-n", namespace, "get", kind, name, "-o", "json", check=False)
        return found.returncode == 0 and \
            (json.loads(found.stdout).get("status") or {}).get("state", {}).get("phase") == wanted
    return probe


def test_a_jobset_of_three_nodes_trains_to_completed(cluster):
    """JobSet v0.12.0: one Indexed Job per node behind the JobSet's headless Service, the pods
    named by hostname.subdomain; the JobSet is Completed when every replicated Job completes
    (its default success policy, pkg/controllers/jobset_controller.go)."""
    submit(cluster, "jobset", "js", NODES)
    wait(cluster, "js", "jobsets.jobset.x-k8s.io", "js", "JobSet condition Completed",
         condition(cluster, "js", "jobsets.jobset.x-k8s.io", "js", "Completed"))
    assert_one_group(cluster, "js", world=NODES, nodes=NODES)


def test_a_volcano_job_trains_to_completed(cluster):
    """Volcano v1.10.0: vc-scheduler binds the gang, the env and svc plugins give each pod
    VC_TASK_INDEX and the job's hostfile and headless Service; the Job's phase is Completed
    once its tasks succeed (pkg/controllers/job/state/running.go)."""
    submit(cluster, "volcano", "vc", 2)
    wait(cluster, "vc", "jobs.batch.volcano.sh", "vc", "Volcano Job phase Completed",
         phase(cluster, "vc", "jobs.batch.volcano.sh", "vc", "Completed"))
    assert_one_group(cluster, "vc", world=2, nodes=2)


def test_a_leaderworkerset_group_trains_to_exit_zero(cluster):
    """LWS v0.9.0 has no success condition: a LeaderWorkerSet serves and its StatefulSets
    restart every pod that ends (restartPolicy Always). What is asserted instead: the leader
    and every worker ran the training to exit 0 once, in one group."""
    submit(cluster, "lws", "lws", 2)

    def all_ran() -> bool:
        return len(first_success(runs(cluster, "lws"))) == 2
    wait(cluster, "lws", "leaderworkersets.leaderworkerset.x-k8s.io", "lws", "leader and worker exit 0", all_ran)
    assert_one_group(cluster, "lws", world=2, nodes=2)


def test_a_trainjob_trains_to_complete(cluster):
    """Trainer v2.3.0: the TrainJob's JobSet (made from the torch-distributed runtime) runs
    the nodes; the TrainJob's condition Complete follows its JobSet's completion
    (pkg/runtime/framework/plugins/jobset)."""
    submit(cluster, "trainer", "tj", 2)
    wait(cluster, "tj", "trainjobs.trainer.kubeflow.org", "tj", "TrainJob condition Complete",
         condition(cluster, "tj", "trainjobs.trainer.kubeflow.org", "tj", "Complete"))
    assert_one_group(cluster, "tj", world=2, nodes=2)


def test_an_elastic_pytorchjob_trains_to_succeeded(cluster):
    """training-operator v1.8.1 with elasticPolicy: Worker pods only, PET_RDZV_ENDPOINT on
    worker 0's Service; Succeeded once the workers succeed."""
    submit(cluster, "kubeflow-elastic", "pte", 2)
    wait(cluster, "pte", "pytorchjobs.kubeflow.org", "pte", "PyTorchJob condition Succeeded",
         condition(cluster, "pte", "pytorchjobs.kubeflow.org", "pte", "Succeeded"))
    assert_one_group(cluster, "pte", world=2, nodes=2)
