"""Every Kubernetes kind torchpod renders, end to end on the real control plane: the
manifest as `invoke manifests` writes it is applied with kubectl into a namespace that
enforces the Pod Security level its header states; the real operator (installed once for
the module, torchpod_toolkit.kube.operators) makes the pods; the real scheduler (Volcano's
vc-scheduler for a Volcano Job) binds them to the kubelet stand-in's three nodes
(torchpod_toolkit.kube.kubelet), which runs them as containers of the cluster tier's image;
the launcher in each reads what the operator gave its pod and runs torchrun. Each job is
waited for, bounded, until it reaches its own success condition, and its pods' logs show
one group of the expected world size (the DDP example trains on a Volcano job of three, a
Volcano job meets at the etcd its manifest brings, and a preflight job proves a JobSet's
fabric);
then the operator model (what `invoke demo --manifest` runs without a plane) is held to
the pods the real operator made. Two faults close the module: an elastic job's deleted
pod, recreated and resumed from the snapshot, and a Volcano gang one node short, of which
no pod starts.

Without the control plane's or an operator's programs the tests fail under CI
(TORCHPOD_REQUIRE_TOOLS=1) and skip elsewhere, naming `invoke kube.build`; without the
image (``cluster_image``) they fail."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from torchpod_toolkit.cluster.runner import parse_results
from torchpod_toolkit.kube import kubelet as kubelet_mod
from torchpod_toolkit.kube import operators
from torchpod_toolkit.manifests import kube as kube_manifests
from torchpod_toolkit.manifests import operators as model_operators
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


def submit(cluster: Cluster, scheduler: str, name: str, nodes: int, command: tuple[str, ...] = (),
           **options: Any) -> dict[str, Any]:
    """torchpod's render for ``scheduler`` written to a file and applied as written, in a new
    namespace ``name`` labelled with the Pod Security level the render's header states. The
    command is the allreduce check unless ``command`` names another."""
    check = command or (f"{EXAMPLES}/allreduce_check.py", "--expect-world", str(nodes), "--expect-nodes", str(nodes))
    options = {"gpus_per_node": 0, **options}
    (out,) = [o for o in render(JobSpec(scheduler, nodes, cluster.image, check, name=name, namespace=name,
                                        **options)) if o.name.endswith(".yaml")]
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
    has removed since included), with its log (Kubelet.attempts), the pods' init containers aside."""
    init = init_containers(cluster, namespace)
    return [Ran(a.pod, a.attempt, a.code, a.log) for a in cluster.kubelet.attempts(namespace)
            if (a.pod, a.container) not in init]


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


# the model's values that name what only a real node or the API server decides
NODE_BOUND = re.compile(r"gpu-node-|^[0-9a-f]{8}-0000-4000-8000-|^10\.96\.0\.1$|^443$")


def hostname(pod: dict[str, Any]) -> str:
    """A pod's hostname: spec.hostname where the operator sets one, else its name (a plain
    Job's pod, <job>-<index> and a random suffix, carries none and never matches a model's)."""
    return pod["spec"].get("hostname") or pod["metadata"]["name"]


def operator_pods(cluster: Cluster, namespace: str, wanted: list[str]) -> list[dict[str, Any]]:
    """The namespace's pods once their hostnames are ``wanted``, read until WAIT runs out. LWS
    deletes a group whose pod ended and makes it anew (the render's restart policy
    RecreateGroupOnPodRestart, api/leaderworkerset/v1/leaderworkerset_types.go at v0.9.0), so
    one read may fall between two groups and find none; the last read is what a failure shows."""
    deadline = time.monotonic() + WAIT
    while True:
        found = json.loads(cluster.kube.kubectl("-n", namespace, "get", "pods", "-o", "json").stdout)["items"]
        names = sorted(hostname(p) for p in found)
        if names == wanted or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    assert wanted == names, "the model's pods have other hostnames"
    return found


def assert_model_agrees(cluster: Cluster, namespace: str, path: Path) -> None:
    """The operator model (torchpod_toolkit.manifests.operators, what `invoke demo --manifest`
    runs without a control plane) against the real operator, side by side on the same
    manifest: the same pods by hostname, each pod's subdomain among its names, and every variable the
    model gives a pod with the model's value, in the container the stand-in ran from the
    operator's pod (what node, uid and cluster IP decide is left out)."""
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    model = {p.hostname: p for p in model_operators.pods(docs)}
    found = operator_pods(cluster, namespace, sorted(model))
    for pod in found:
        name, spec = pod["metadata"]["name"], pod["spec"]
        expected = model[hostname(pod)]
        subdomain = spec.get("subdomain")
        if subdomain:
            assert any(n.startswith(f"{expected.hostname}.{subdomain}") for n in expected.dns_names), \
                (name, subdomain, expected.dns_names)
        labels = [f"{kubelet_mod.LABEL}={cluster.kubelet.id}", f"io.kubernetes.pod.namespace={namespace}",
                  f"io.kubernetes.pod.name={name}", f"io.kubernetes.container.name={spec['containers'][0]['name']}"]
        # an LWS pod restarts (Always) and its group is made anew: wait for its next container
        (container, *_) = until(f"a container of pod {name}", lambda labels=labels: cluster.docker.containers.list(
            all=True, filters={"label": labels}), seconds=WAIT)
        real = dict(e.split("=", 1) for e in container.attrs["Config"]["Env"])
        differ = [(k, v, real.get(k)) for k, v in expected.env if not NODE_BOUND.search(v) and real.get(k) != v]
        assert not differ, f"{name}: (variable, model, operator): {differ}"


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
    job = submit(cluster, "kubeflow", "pt", 2)
    wait(cluster, "pt", "pytorchjobs.kubeflow.org", "pt", "PyTorchJob condition Succeeded",
         condition(cluster, "pt", "pytorchjobs.kubeflow.org", "pt", "Succeeded"))
    assert_one_group(cluster, "pt", world=2, nodes=2)
    assert_model_agrees(cluster, "pt", job["path"])
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
    job = submit(cluster, "jobset", "js", NODES)
    wait(cluster, "js", "jobsets.jobset.x-k8s.io", "js", "JobSet condition Completed",
         condition(cluster, "js", "jobsets.jobset.x-k8s.io", "js", "Completed"))
    assert_one_group(cluster, "js", world=NODES, nodes=NODES)
    assert_model_agrees(cluster, "js", job["path"])


def test_a_volcano_job_trains_to_completed(cluster):
    """Volcano v1.10.0: vc-scheduler binds the gang, the env and svc plugins give each pod
    VC_TASK_INDEX and the job's hostfile and headless Service; the Job's phase is Completed
    once its tasks succeed (pkg/controllers/job/state/running.go)."""
    job = submit(cluster, "volcano", "vc", 2)
    wait(cluster, "vc", "jobs.batch.volcano.sh", "vc", "Volcano Job phase Completed",
         phase(cluster, "vc", "jobs.batch.volcano.sh", "vc", "Completed"))
    assert_one_group(cluster, "vc", world=2, nodes=2)
    assert_model_agrees(cluster, "vc", job["path"])


def test_a_volcano_job_with_a_master_task_trains_to_completed(cluster):
    """Volcano v1.10.0 with a master and a worker task: the pytorch plugin gives each pod
    MASTER_ADDR (the master's pod on the job's headless Service), MASTER_PORT, WORLD_SIZE and
    RANK (pkg/controllers/job/plugins/distributed-framework/pytorch/pytorch.go)."""
    job = submit(cluster, "volcano-master", "vcm", 2)
    wait(cluster, "vcm", "jobs.batch.volcano.sh", "vcm", "Volcano Job phase Completed",
         phase(cluster, "vcm", "jobs.batch.volcano.sh", "vcm", "Completed"))
    assert_one_group(cluster, "vcm", world=2, nodes=2)
    assert_model_agrees(cluster, "vcm", job["path"])


def test_a_leaderworkerset_group_trains_to_exit_zero(cluster):
    """LWS v0.9.0 has no success condition: a LeaderWorkerSet serves and its StatefulSets
    restart every pod that ends (restartPolicy Always). What is asserted instead: the leader
    and every worker ran the training to exit 0 once, in one group."""
    job = submit(cluster, "lws", "lws", 2)

    def all_ran() -> bool:
        return len(first_success(runs(cluster, "lws"))) == 2
    wait(cluster, "lws", "leaderworkersets.leaderworkerset.x-k8s.io", "lws", "leader and worker exit 0", all_ran)
    assert_one_group(cluster, "lws", world=2, nodes=2)
    assert_model_agrees(cluster, "lws", job["path"])


def test_a_trainjob_trains_to_complete(cluster):
    """Trainer v2.3.0: the TrainJob's JobSet (made from the torch-distributed runtime) runs
    the nodes; the TrainJob's condition Complete follows its JobSet's completion
    (pkg/runtime/framework/plugins/jobset)."""
    job = submit(cluster, "trainer", "tj", 2)
    wait(cluster, "tj", "trainjobs.trainer.kubeflow.org", "tj", "TrainJob condition Complete",
         condition(cluster, "tj", "trainjobs.trainer.kubeflow.org", "tj", "Complete"))
    assert_one_group(cluster, "tj", world=2, nodes=2)
    assert_model_agrees(cluster, "tj", job["path"])


def test_an_elastic_pytorchjob_trains_to_succeeded(cluster):
    """training-operator v1.8.1 with elasticPolicy: Worker pods only, PET_RDZV_ENDPOINT on
    worker 0's Service; Succeeded once the workers succeed."""
    job = submit(cluster, "kubeflow-elastic", "pte", 2)
    wait(cluster, "pte", "pytorchjobs.kubeflow.org", "pte", "PyTorchJob condition Succeeded",
         condition(cluster, "pte", "pytorchjobs.kubeflow.org", "pte", "Succeeded"))
    assert_one_group(cluster, "pte", world=2, nodes=2)
    assert_model_agrees(cluster, "pte", job["path"])


def test_the_ddp_example_trains_on_a_volcano_job_of_three_nodes(cluster):
    """The DDP example (ddp_resnet.py) trained by three pods vc-scheduler placed on three
    nodes: every rank finishes its steps with a finite loss, in one group of three under one
    rendezvous id, and DDP leaves the three replicas' parameters equal."""
    job = submit(cluster, "volcano", "ddp3", NODES, (f"{EXAMPLES}/ddp_resnet.py", "--steps", "4"))
    wait(cluster, "ddp3", "jobs.batch.volcano.sh", "ddp3", "Volcano Job phase Completed",
         phase(cluster, "ddp3", "jobs.batch.volcano.sh", "ddp3", "Completed"))
    done = first_success(runs(cluster, "ddp3"))
    results = [res for r in done.values() for res in parse_results(r.log) if res.get("workload") == "ddp_resnet"]
    logs = "\n".join(f"--- {r.pod} ({r.container}, exit {r.code})\n{r.log[-2000:]}" for r in done.values())
    assert sorted(r["rank"] for r in results) == list(range(NODES)), logs[-8000:]
    assert all(r["ok"] and r["steps"] == 4 and r["world_size"] == NODES for r in results), results
    assert len({r["hostname"] for r in results}) == NODES and len({r["run_id"] for r in results}) == 1, results
    assert len({round(r["param_checksum"], 6) for r in results}) == 1, "the replicas' parameters differ"
    assert_model_agrees(cluster, "ddp3", job["path"])


def test_a_volcano_job_meets_at_the_etcd_its_manifest_brings(cluster, require_tool, tmp_path):
    """`--rdzv etcd --etcd-server`: the manifest's own etcd Pod and Service are applied with
    the Volcano job, whose ranks meet by etcd-v2 at the Service's name (the stand-in names
    the etcd pod by the Services that select it, podargs.service_names). quay.io/coreos/etcd,
    the image the render names, cannot be pulled here: the cluster image with Debian's
    etcd-server binary as `etcd` (3.4, whose --enable-v2 serves the v2 API as 3.5's does)
    stands in for it under that name, for this test only."""
    binary = require_tool("etcd", "etcd-server")
    context = tmp_path / "etcd-image"
    context.mkdir()
    shutil.copy2(binary, context / "etcd")
    (context / "Dockerfile").write_text(f"FROM {cluster.image}\nCOPY etcd /usr/local/bin/etcd\n")
    cluster.docker.images.build(path=str(context), tag=kube_manifests.ETCD_IMAGE, rm=True)
    try:
        job = submit(cluster, "volcano", "ve", 2, rdzv="etcd", etcd_server=True)
        assert "Rendezvous: etcd-v2 at ve-etcd:2379" in job["path"].read_text()
        wait(cluster, "ve", "jobs.batch.volcano.sh", "ve", "Volcano Job phase Completed",
             phase(cluster, "ve", "jobs.batch.volcano.sh", "ve", "Completed"))
        assert_one_group(cluster, "ve", world=2, nodes=2)
        # the group met in this etcd: torch's etcd-v2 rendezvous keeps its state under /torch/elastic
        (server,) = cluster.docker.containers.list(filters={"label": [
            f"{kubelet_mod.LABEL}={cluster.kubelet.id}", "io.kubernetes.pod.namespace=ve",
            "io.kubernetes.pod.name=ve-etcd", "io.kubernetes.container.name=etcd"]})
        read = "import urllib.request as u; print(u.urlopen('http://127.0.0.1:2379/v2/keys/?recursive=true').read())"
        code, keys = server.exec_run(["/opt/venv/bin/python", "-c", read])
        assert code == 0 and '"key":"/torch/elastic' in keys.decode(), keys.decode()[-2000:]
    finally:
        cluster.docker.images.remove(kube_manifests.ETCD_IMAGE, force=True)


def test_a_preflight_job_proves_the_fabric_of_a_jobset_and_names_no_slow_node(cluster):
    """`--workload preflight` (torchpod.preflight, run as the pods' module) on a JobSet of
    three: rank 0 reports every node and pair, names no node slow or failing (nothing is
    throttled), and the JobSet completes because every rank exited 0."""
    job = submit(cluster, "jobset", "pf", NODES, ("--pair-bytes", "4M", "--max-bytes", "1M", "--iters", "3",
                                                 "--warmup", "1", "--allow-undecided"), workload="preflight")
    wait(cluster, "pf", "jobsets.jobset.x-k8s.io", "pf", "JobSet condition Completed",
         condition(cluster, "pf", "jobsets.jobset.x-k8s.io", "pf", "Completed"))
    done = first_success(runs(cluster, "pf"))
    (report, *more) = [res for r in done.values() for res in parse_results(r.log) if res.get("workload") == "preflight"]
    assert not more and len(done) == NODES, done
    assert report["world_size"] == NODES and len(report["nodes"]) == NODES, report
    assert report["slow_nodes"] == [] and report["failing"] == [], report
    assert report["pairs"] and all(p["busbw_gbps"] > 0 for p in report["pairs"]), report["pairs"]
    assert_model_agrees(cluster, "pf", job["path"])


def test_a_runai_pytorchjob_is_admitted_and_its_pods_wait_for_runais_scheduler(cluster):
    """The Run:ai render is a PyTorchJob for Run:ai's scheduler, which no module here builds:
    the API server and training-operator's webhook admit it as written, the operator makes
    the pods the operator model names, each naming runai-scheduler, and the default
    scheduler leaves them to it (none is bound)."""
    job = submit(cluster, "runai", "ra", 2)
    docs = [d for d in yaml.safe_load_all(job["path"].read_text()) if d]

    def made() -> list[dict[str, Any]]:
        found = cluster.kube.kubectl("-n", "ra", "get", "pods", "-o", "json", check=False)
        pods = json.loads(found.stdout).get("items", []) if found.returncode == 0 else []
        return pods if len(pods) == 2 else []
    pods = until("the operator makes the Run:ai job's pods", made, seconds=WAIT)
    assert sorted(p["metadata"]["name"] for p in pods) == sorted(p.name for p in model_operators.pods(docs))
    assert {p["spec"].get("schedulerName") for p in pods} == {"runai-scheduler"}
    time.sleep(5)  # the default scheduler runs every second: five of them bind nothing
    assert _bound(cluster, "ra") == []


# --- faults ---------------------------------------------------------------------------------------

EPOCHS = 10
RESUMED = "Resuming training from snapshot at Epoch"


def test_an_elastic_pytorchjob_whose_pod_is_deleted_gets_it_back_and_resumes_from_its_snapshot(
        cluster, tmp_path_factory):
    """training-operator v1.8.1 recreates a deleted Worker pod (pkg/controller.v1/common/pod.go:
    a replica index without a pod gets one); the torchrun agent on the other pod sees its
    group fail, re-forms the rendezvous with the new pod (elasticPolicy maxRestarts), every
    rank loads the snapshot from the shared hostPath volume, and the job still ends Succeeded."""
    shared = tmp_path_factory.mktemp("snapshot")
    shared.chmod(0o777)  # the pods run as uid 1000
    command = (f"{EXAMPLES}/snapshot_trainer.py", str(EPOCHS), "1", "--snapshot-path", "/shared/snapshot.pt",
               "--epoch-seconds", "1", "--dataset-size", "256")
    submitted = submit(cluster, "kubeflow-elastic", "ptf", 2, command, volume=(f"hostpath:{shared}:/shared",))
    assert submitted["level"] == "privileged"  # a hostPath volume fails baseline; the header says so

    def epochs_run() -> int:
        found = [int(n) for r in runs(cluster, "ptf") for n in re.findall(r"EPOCHS_RUN=(\d+)\)", r.log)]
        return max(found, default=0)
    until("three epochs run before the fault", lambda: epochs_run() >= 3, seconds=WAIT)
    saved = epochs_run()
    assert saved < EPOCHS, "training finished before the fault; slow the epochs down"
    old = json.loads(cluster.kube.kubectl("-n", "ptf", "get", "pod", "ptf-worker-1", "-o", "json").stdout)
    cluster.kube.kubectl("-n", "ptf", "delete", "pod", "ptf-worker-1", "--wait=false")

    def recreated() -> bool:
        found = cluster.kube.kubectl("-n", "ptf", "get", "pod", "ptf-worker-1", "-o", "json", check=False)
        return found.returncode == 0 and json.loads(found.stdout)["metadata"]["uid"] != old["metadata"]["uid"]
    until("the operator recreates the deleted pod", recreated, seconds=WAIT)
    wait(cluster, "ptf", "pytorchjobs.kubeflow.org", "ptf", "PyTorchJob condition Succeeded after the fault",
         condition(cluster, "ptf", "pytorchjobs.kubeflow.org", "ptf", "Succeeded"))
    # the job succeeds with worker 0 (its success policy); the other may still be exiting
    done = until("both pods' runs exit 0", lambda: len(first_success(runs(cluster, "ptf"))) == 2
                 and first_success(runs(cluster, "ptf")), seconds=60)
    results = [res for r in done.values() for res in parse_results(r.log) if res.get("workload") == "snapshot_trainer"]
    logs = "\n".join(f"--- {r.pod} ({r.container}, exit {r.code})\n{r.log[-3000:]}" for r in runs(cluster, "ptf"))
    assert sorted(r["rank"] for r in results) == [0, 1], logs[-12000:]
    assert all(r["resumed_from"] is not None and r["resumed_from"] >= saved for r in results), (results, saved)
    assert RESUMED in done["ptf-worker-1"].log, logs[-12000:]  # the new pod started from the snapshot


def _bound(cluster: Cluster, namespace: str) -> list[str]:
    found = cluster.kube.kubectl("-n", namespace, "get", "pods", "-o", "json", check=False)
    pods = json.loads(found.stdout).get("items", []) if found.returncode == 0 else []
    return [p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")]


def _podgroup_conditions(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    found = cluster.kube.kubectl("-n", namespace, "get", "podgroups.scheduling.volcano.sh", "-o", "json", check=False)
    groups = json.loads(found.stdout).get("items", []) if found.returncode == 0 else []
    return [c for g in groups for c in (g.get("status") or {}).get("conditions") or []]


# more than half a node's GPUs (NodeShape: 8): one pod per node, whatever the CPUs and memory
GPUS_ONE_POD_PER_NODE = 5


def test_a_volcano_gang_one_node_short_starts_no_pod_at_all(cluster):
    """Volcano v1.10.0's gang plugin holds a job until minAvailable pods can be placed together
    (pkg/scheduler/plugins/gang/gang.go: the PodGroup gets condition Unschedulable, "N/M tasks
    in gang unschedulable"). The same job shape at the cluster's node count is bound to every
    node (it fits); one node more is bound nowhere, and no container of it starts."""
    shape = {"gpus_per_node": GPUS_ONE_POD_PER_NODE, "cpus_per_node": 2, "memory_per_node": "48Gi"}
    submit(cluster, "volcano", "gfit", NODES, ("/bin/true",), **shape)
    bound = until("the job at the node count bound to every node", lambda: len(_bound(cluster, "gfit")) == NODES
                  and sorted(_bound(cluster, "gfit")), seconds=WAIT)
    assert sorted(bound) == sorted(cluster.kubelet.names), bound
    cluster.kube.kubectl("delete", "namespace", "gfit", "--wait=false")

    submit(cluster, "volcano", "gshort", NODES + 1, ("/bin/true",), **shape)

    def unschedulable() -> list[dict[str, Any]]:
        return [c for c in _podgroup_conditions(cluster, "gshort")
                if c.get("type") == "Unschedulable" and c.get("status") == "True"]
    held = until("the PodGroup's condition Unschedulable", unschedulable, seconds=WAIT)
    # "N/M tasks in gang unschedulable: pod group is not ready, 4 minAvailable": M counts the
    # pods made so far, and the controller makes none while the PodGroup is Pending
    assert re.search(rf"\d+/\d+ tasks in gang unschedulable: pod group is not ready, {NODES + 1} minAvailable",
                     held[0].get("message", "")), held
    deadline = time.monotonic() + 20  # the scheduler runs every second: 20 of them bind nothing
    while time.monotonic() < deadline:
        assert _bound(cluster, "gshort") == [], "a pod of a gang one node short was bound"
        time.sleep(1.0)
    assert runs(cluster, "gshort") == []
    cluster.kube.kubectl("delete", "namespace", "gshort", "--wait=false")
