"""What the modules that run every Kubernetes kind on the real control plane share
(tests/cluster/test_kube_jobs.py: Kubeflow's, Trainer's, JobSet's and LeaderWorkerSet's
kinds; tests/cluster/test_kube_volcano.py: Volcano's): the module's plane with its kubelet
stand-in and the operators the module installs; a job rendered, applied as written and
waited for, bounded, until its own success condition; what its pods ran; and the operator
model (what `invoke demo --manifest` runs without a plane) held to the pods the real
operator made. Each module installs only the operators its kinds need, so the two run on
planes of their own, side by side."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from torchpod_toolkit.cluster.runner import parse_results
from torchpod_toolkit.kube import kubelet as kubelet_mod
from torchpod_toolkit.kube import operators, operatorspecs
from torchpod_toolkit.manifests import operators as model_operators
from torchpod_toolkit.manifests import submit as submit_mod
from torchpod_toolkit.manifests.render import render
from torchpod_toolkit.manifests.spec import JobSpec, check

from cluster_helpers import EXAMPLES, LABEL, label_value
from kube_helpers import Kube, require_operator, settled, until

NODES = 3
WAIT = 450.0  # seconds a job has to succeed: pods start in seconds, the check trains in a few (a bound: a
# passing job never waits it out; a plane beside the tier's other tests on two cores once took 190 s, and
# a first-job page's jobs beside a many-node test, before such tests took turns (tests/crowd.py), 300 s)
EXITING = 60.0  # seconds a pod's run has to end once its job succeeded
REFUSED = ("FailedCreate", "FailedCreatePod")  # a controller's event: the API refused a pod it made
# ...except that it exists: a controller that names its pods (training-operator v1.8.1 names
# each <job>-<role>-<index>) and reconciles again before its cache holds the pod it created
# is answered AlreadyExists (apimachinery's `pods "pt-worker-0" already exists`), records
# FailedCreatePod all the same (pkg/controller.v1/control/pod_control.go, createPods) and
# finds the pod on its next pass
EXISTS = re.compile(r'^Error creating: pods "[^"]+" already exists$')
NO_IMAGE = "is not on this machine"  # the stand-in's word for an image it does not have (podworker)
LEVEL = re.compile(r"^# Pod Security: namespace level '([a-z]+)'", re.MULTILINE)


@dataclass
class Cluster:
    """The module's plane with its kubelet stand-in and the module's operators installed."""

    kube: Kube
    kubelet: kubelet_mod.Kubelet
    docker: Any
    image: str
    folder: Path


def start(kube: Kube, docker_client: Any, image: str, session_id: str, tmp_path_factory: Any,
          names: Sequence[str], node_labels: Mapping[str, Mapping[str, str]] | None = None,
          nodes: int = NODES) -> Iterator[Cluster]:
    """A module fixture's body: ``nodes`` nodes (``node_labels``: each one's --node-labels)
    and the operators ``names`` on the module's plane, stopped after the module."""
    kubectl = operators.Kubectl(kube.plan.bindir / "kubectl", kube.plane.kubeconfig)
    running: list[operatorspecs.Running] = []
    stand_in = kubelet_mod.Kubelet(kube.plane, docker_client, nodes=nodes, labels={LABEL: label_value(session_id)},
                                version=kube.plan.kubernetes, node_labels=node_labels).start()
    try:
        for name in names:
            plan = require_operator(name)
            folder = tmp_path_factory.mktemp(f"operator-{name}")
            running.append(operators.install(operators.operator(name), plan, kubectl, kube.plane, folder, os.environ,
                                             init_image=image))
        until("every node Ready", lambda: all(ready(kube, n) for n in stand_in.names))
        yield Cluster(kube, stand_in, docker_client, image, tmp_path_factory.mktemp("jobs"))
    finally:
        stand_in.stop()
        for started in reversed(running):
            operators.stop(started)


def ready(kube: Kube, name: str) -> bool:
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


def submit(cluster: Cluster, scheduler: str, name: str, nodes: int | str, command: tuple[str, ...] = (),
           edit: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None, by_submit: bool = False,
           image: str = "", namespace: str = "", **options: Any) -> dict[str, Any]:
    """torchpod's render for ``scheduler`` written to a file and applied as written, in a new
    namespace (``namespace``, else ``name``) labelled with the Pod Security level the render's
    header states. The command is the allreduce check unless ``command`` names another;
    ``edit`` changes the objects first, as a user adds what the render does not say (a queue,
    say); ``image``: the job's image, the cluster image unless named. Returns the file, the
    level and the objects applied."""
    job_command = command or (f"{EXAMPLES}/allreduce_check.py", "--expect-world", str(nodes), "--expect-nodes",
                              str(nodes))
    options = {"gpus_per_node": 0, **options}
    namespace = namespace or name
    spec = JobSpec(scheduler, nodes, image or cluster.image, job_command, name=name, namespace=namespace, **options)
    (out,) = [o for o in render(spec) if o.name.endswith(".yaml")]
    objects = [d for d in yaml.safe_load_all(out.text) if d]
    path = cluster.folder / (out.name if namespace == name else f"{namespace}-{out.name}")
    if edit is not None:
        objects = edit(objects)
    path.write_text(out.text if edit is None else yaml.safe_dump_all(objects, sort_keys=False))
    level = LEVEL.search(out.text)
    assert level, f"the render names no Pod Security level:\n{out.text[:600]}"
    cluster.kube.namespace(namespace)
    cluster.kube.kubectl("label", "namespace", namespace, f"pod-security.kubernetes.io/enforce={level.group(1)}")
    if by_submit:  # as `invoke manifests --submit` does: the kind's own submitter, the user's kubeconfig
        env = {**os.environ, "KUBECONFIG": str(cluster.kube.plane.kubeconfig),
               "PATH": f"{cluster.kube.plan.bindir}:{os.environ['PATH']}"}
        assert submit_mod.submit(check(spec), path, env) == 0, f"--submit of {path} failed"
    else:
        cluster.kube.kubectl("apply", "--server-side", "-f", str(path))
    return {"path": path, "level": level.group(1), "objects": objects}


def init_containers(cluster: Cluster, namespace: str) -> set[tuple[str, str]]:
    """(pod, container) of every init container the pods of ``namespace`` declare (an
    operator adds its own: training-operator's init-pytorch)."""
    found = cluster.kube.kubectl("-n", namespace, "get", "pods", "-o", "json", check=False)
    pods = json.loads(found.stdout).get("items", []) if found.returncode == 0 else []
    return {(pod["metadata"]["name"], c["name"]) for pod in pods for c in pod["spec"].get("initContainers") or ()}


# the init containers an operator adds to pods (training-operator's init-pytorch), known by
# name once their pods are gone (a failed job's pods deleted by its clean-pod policy)
OPERATOR_INITS = frozenset(c["name"] for c in operatorspecs.INIT_CONTAINERS)


def runs(cluster: Cluster, namespace: str) -> list[Ran]:
    """Every app container the stand-in ran for the pods of ``namespace`` (each attempt, those it
    has removed since included), with its log (Kubelet.attempts), the pods' init containers and
    the operators' aside."""
    init = init_containers(cluster, namespace)
    return [Ran(a.pod, a.attempt, a.code, a.log) for a in cluster.kubelet.attempts(namespace)
            if (a.pod, a.container) not in init and a.container not in OPERATOR_INITS]


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


def phase(cluster: Cluster, namespace: str, kind: str, name: str, wanted: str) -> Callable[[], bool]:
    """Whether the job object's status.state.phase (a Volcano Job's) is ``wanted``."""
    def probe() -> bool:
        found = cluster.kube.kubectl("-n", namespace, "get", kind, name, "-o", "json", check=False)
        return found.returncode == 0 and \
            (json.loads(found.stdout).get("status") or {}).get("state", {}).get("phase") == wanted
    return probe


def refusals(cluster: Cluster, namespace: str) -> list[str]:
    """What no wait mends: the events in which a controller says the API refused a pod it
    made, and a container whose image the stand-in does not have (it pulls nothing)."""
    found = cluster.kube.kubectl("-n", namespace, "get", "events", "-o", "json", check=False)
    items = json.loads(found.stdout).get("items", []) if found.returncode == 0 else []
    out = [f"{e.get('reason')}: {e.get('message')}" for e in items
           if e.get("reason") in REFUSED and not EXISTS.match(str(e.get("message", "")))]
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
    def pods() -> list[dict[str, Any]]:
        return json.loads(cluster.kube.kubectl("-n", namespace, "get", "pods", "-o", "json").stdout)["items"]

    found = settled(pods, lambda items: sorted(hostname(p) for p in items) == wanted, WAIT)
    assert wanted == sorted(hostname(p) for p in found), "the model's pods have other hostnames"
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
    on ``nodes`` distinct hosts, under one rendezvous id. A job's success condition can come
    before its last pod's run has ended (a PyTorchJob's with its Master's success, an elastic
    one's with any Worker's), so the runs are read until ``nodes`` pods have one that exited
    0, for at most EXITING seconds."""
    done = list(settled(lambda: first_success(runs(cluster, namespace)), lambda ok: len(ok) >= nodes,
                        EXITING).values())
    text = "\n".join(f"--- {r.pod} ({r.container}, exit {r.code})\n{r.log[-3000:]}" for r in runs(cluster, namespace))
    results = [res for r in done for res in parse_results(r.log) if res.get("workload") == "allreduce_check"]
    assert sorted(r["rank"] for r in results) == list(range(world)), text[-12000:]
    assert all(r["ok"] for r in results), results
    assert {r["world_size"] for r in results} == {world}, results
    assert all(r["nodes"] == nodes and len(set(r["hosts"])) == nodes for r in results), results
    assert len({r["run_id"] for r in results}) == 1, "ranks saw different rendezvous ids"
    assert len({r.pod for r in done}) == nodes, text[-12000:]
    assert_ranks_follow_the_named_nodes(done, text)
    return results


# what `torchpod run` prints on every node: its node index, and the group rank torch will
# give it where that is known before the rendezvous (not in an elastic job), or the
# topology domain it ranks in
LAUNCHED = re.compile(r"torchpod: [\w-]+: node (\d+) of [\d:]+(?: \(group rank (\d+)\))?"
                      r"(?: \(ranked in domain [^)]*\))?,")


def assert_ranks_follow_the_named_nodes(done: Sequence[Ran], text: str, workload: str = "allreduce_check") -> None:
    """Each pod's ranks sit on the node its launcher named: the group rank it printed, and in
    any job the group ranks in the order of the node indexes (from ``workload``'s result lines)."""
    named = []
    for run in done:
        said = LAUNCHED.findall(run.log)
        assert len(said) == 1, f"{run.pod}: {said}\n{run.log[-3000:]}"
        node, group = int(said[0][0]), said[0][1]
        ranks = {res["group_rank"] for res in parse_results(run.log) if res.get("workload") == workload}
        assert len(ranks) == 1, (run.pod, ranks)
        if group:
            assert ranks == {int(group)} == {node}, (run.pod, said, ranks)
        named.append((node, ranks.pop()))
    assert [g for _, g in sorted(named)] == sorted(g for _, g in named), (named, text[-6000:])


def bound(cluster: Cluster, namespace: str) -> list[str]:
    found = cluster.kube.kubectl("-n", namespace, "get", "pods", "-o", "json", check=False)
    pods = json.loads(found.stdout).get("items", []) if found.returncode == 0 else []
    return [p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")]


def podgroup_conditions(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    found = cluster.kube.kubectl("-n", namespace, "get", "podgroups.scheduling.volcano.sh", "-o", "json", check=False)
    groups = json.loads(found.stdout).get("items", []) if found.returncode == 0 else []
    return [c for g in groups for c in (g.get("status") or {}).get("conditions") or []]
