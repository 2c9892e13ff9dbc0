"""Which pods an operator makes of a job object, by role and index: the shape the recorded
operator model (derive.py) fills in. Pure.

A shape says only how many pods there are, which role and indexes each has, and which
pod template and container each runs: the counts in the object, read as the operator's API
defines them. Everything the operator writes into a pod (its name, hostname, labels,
annotations, environment, the files it mounts) is derived from what the real operator did,
recorded (manifests/recorded/), never written here.

Each pod's vocabulary is what a recorded value may be made of: the job's name and
namespace, the pod's role, and numbers: ``index`` (in its role or Job), ``global`` (in the
job), ``count`` (pods of its role), ``total`` (pods of the job), ``count_<role>`` for
every role, and what the object states (``nproc``, ``min``, ``max``, ``group``...).

The signature names the parts of the object that change what the operator writes
(Volcano's plugins and their arguments, an elasticPolicy, a JobSet's network): the derived
model refuses a job whose signature, or any of whose roles, was never recorded.

Sources (the API types): volcano-sh/apis pkg/apis/batch/v1alpha1 (tasks, replicas,
minAvailable, plugins); kubeflow/training-operator pkg/apis/kubeflow.org/v1
(pytorchReplicaSpecs Master then Worker, nprocPerNode, elasticPolicy); kubeflow/trainer
pkg/apis/trainer/v1alpha1 (trainer.numNodes, numProcPerNode); kubernetes-sigs/lws
api/leaderworkerset/v1 (replicas, leaderWorkerTemplate.size, the leader as worker 0);
kubernetes-sigs/jobset api/jobset/v1alpha2 (replicatedJobs, replicas, the Job's completions).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

from torchpod.errors import InputError
from torchpod_toolkit.manifests.models.common import main_container

Obj = Mapping[str, Any]
LWS = "leaderworkerset.sigs.k8s.io/"


@dataclass(frozen=True)
class Slot:
    """One pod of the shape: its role, its vocabulary, and the template and container it runs."""

    role: str
    strings: Mapping[str, str]
    numbers: Mapping[str, int]
    template: Obj  # the pod template's metadata and spec (labels, annotations, hostNetwork)
    container: Obj  # the container (a TrainJob's trainer) torchpod runs in
    # how the operator marks this pod, as the operator's API names it: (labels or
    # annotations, key, value), for finding the recorded pod of the slot
    identity: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True)
class Shape:
    signature: tuple[str, ...]
    slots: tuple[Slot, ...]


def _whole(value: Any, what: str) -> int:
    if value is None:
        raise InputError(f"{what} is not set; expected a whole number (a job without it was never recorded)")
    if isinstance(value, bool) or not str(value).isdigit():
        raise InputError(f"{what} {value!r}: expected a whole number (another form was never recorded)")
    return int(value)


Identity = Callable[[str, int], tuple[tuple[str, str, str], ...]]
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"  # Kubernetes' Indexed Job


def _slots(job: Obj, roles: list[tuple[str, int, Obj, Obj]], numbers: Mapping[str, int],
           identity: Identity, strings: Mapping[str, str] | None = None) -> tuple[Slot, ...]:
    """A slot per pod of ``roles`` (role, pods, template, container) in order; ``identity``:
    the marks of the role's pod ``i``; ``strings``: what else of the object a value may name."""
    meta = job["metadata"]
    strings = {"name": meta["name"], "namespace": meta.get("namespace", "default"), **(strings or {})}
    total = sum(n for _, n, _, _ in roles)
    counts = {f"count_{r.lower().replace('-', '_')}": n for r, n, _, _ in roles}
    out, k = [], 0
    for role, n, template, container in roles:
        for i in range(n):
            out.append(Slot(role, {**strings, "role": role, "role_lower": role.lower()},
                            {"index": i, "global": k, "count": n, "total": total, **counts, **numbers},
                            template, container, identity(role, i)))
            k += 1
    return tuple(out)


def volcano(job: Obj) -> Shape:
    spec = job["spec"]
    tasks = spec["tasks"]
    roles = [(t["name"], _whole(t.get("replicas", 0), f"task {t['name']} replicas"), t["template"],
              main_container(t["template"].get("spec", {}))) for t in tasks]
    total = sum(n for _, n, _, _ in roles)
    plugins = spec.get("plugins") or {}
    signature = ("plugins", *(f"{k}:{' '.join(v or ())}" for k, v in sorted(plugins.items())))
    # pkg/apis/batch/v1alpha1 TaskSpecKey, TaskIndex (annotations on every pod)
    return Shape(signature, _slots(job, roles, {"min": _whole(spec.get("minAvailable", total), "minAvailable")},
                                   lambda role, i: (("annotations", "volcano.sh/task-spec", role),
                                                    ("annotations", "volcano.sh/task-index", str(i)))))


def pytorchjob(job: Obj) -> Shape:
    spec = job["spec"]
    replicas = spec["pytorchReplicaSpecs"]
    order = [t for t in ("Master", "Worker") if t in replicas]
    if sorted(order) != sorted(replicas):
        raise InputError(f"PyTorchJob replica types {sorted(replicas)}: expected Master and Worker "
                         "(no other was recorded)")
    roles = [(t, _whole(replicas[t].get("replicas", 1), f"{t} replicas"), replicas[t]["template"],
              main_container(replicas[t]["template"].get("spec", {}), "pytorch")) for t in order]
    numbers = {"nproc": _whole(spec.get("nprocPerNode", 1), "nprocPerNode")}
    elastic = spec.get("elasticPolicy")
    strings = {}
    if elastic:
        numbers.update(min=_whole(elastic.get("minReplicas"), "elasticPolicy.minReplicas"),
                       max=_whole(elastic.get("maxReplicas"), "elasticPolicy.maxReplicas"))
        if "rdzvHost" in elastic:  # an etcd's, say: the operator writes it into the rendezvous endpoint
            strings["rdzv_host"] = str(elastic["rdzvHost"])
            numbers["rdzv_port"] = _whole(elastic.get("rdzvPort"), "elasticPolicy.rdzvPort")
    # pkg/apis/kubeflow.org/v1 ReplicaTypeLabel, ReplicaIndexLabel
    return Shape(("elastic", *sorted(elastic)) if elastic else ("fixed",), _slots(
        job, roles, numbers, lambda role, i: (("labels", "training.kubeflow.org/replica-type", role.lower()),
                                              ("labels", "training.kubeflow.org/replica-index", str(i))), strings))


def trainjob(job: Obj) -> Shape:
    spec = job["spec"]
    trainer = spec.get("trainer") or {}
    nodes = _whole(trainer.get("numNodes", 1), "trainer.numNodes")
    nproc = _whole(trainer.get("numProcPerNode"), "trainer.numProcPerNode")
    runtime = (spec.get("runtimeRef") or {}).get("name", "")
    return Shape(("runtime", runtime), _slots(job, [("node", nodes, {}, trainer)], {"nproc": nproc},
                                              lambda role, i: (("labels", COMPLETION_INDEX, str(i)),)))


def leaderworkerset(job: Obj) -> Shape:
    spec = job["spec"]
    template = spec["leaderWorkerTemplate"]
    size = _whole(template.get("size", 1), "leaderWorkerTemplate.size")
    groups = _whole(spec.get("replicas", 1), "replicas")
    leader = template.get("leaderTemplate") or template["workerTemplate"]
    worker = template["workerTemplate"]
    slots = []
    for g in range(groups):
        roles = [("leader", 1, leader, main_container(leader.get("spec", {}))),
                 ("worker", size - 1, worker, main_container(worker.get("spec", {})))]
        # api/leaderworkerset/v1 GroupIndexLabelKey, WorkerIndexLabelKey: the leader is worker 0
        def identity(role: str, i: int, g: int = g) -> tuple[tuple[str, str, str], ...]:
            return (("labels", f"{LWS}group-index", str(g)),
                    ("labels", f"{LWS}worker-index", str(i + (role == "worker"))))

        for s in _slots(job, roles, {"size": size, "groups": groups, "group": g}, identity):
            w = s.numbers["global"]  # the worker index within the group
            slots.append(replace(s, numbers={**s.numbers, "index": w, "global": g * size + w, "total": groups * size}))
    policy = (spec.get("networkConfig") or {}).get("subdomainPolicy", "Shared")
    return Shape((f"subdomain:{policy}", "leaderTemplate" if template.get("leaderTemplate") else "workerTemplate"),
                 tuple(slots))


def jobset(job: Obj) -> Shape:
    spec = job["spec"]
    rjobs = spec["replicatedJobs"]
    slots: list[Slot] = []
    total_jobs = sum(_whole(r.get("replicas", 1), f"{r['name']} replicas") for r in rjobs)
    pods = [(r, j) for r in rjobs for j in range(_whole(r.get("replicas", 1), f"{r['name']} replicas"))]
    total = sum(_whole(r["template"]["spec"].get("completions", 1), "completions") for r, _ in pods)
    g = 0
    for n, (rjob, j) in enumerate(pods):
        jspec = rjob["template"]["spec"]
        completions = _whole(jspec.get("completions", 1), f"{rjob['name']} completions")
        if _whole(jspec.get("parallelism", 1), "parallelism") != completions:
            raise InputError(f"JobSet Job {rjob['name']}: parallelism {jspec.get('parallelism', 1)} is not "
                             f"its completions {completions}; expected every pod of the Job running at once")
        template = jspec["template"]
        # api/jobset/v1alpha2 ReplicatedJobNameKey, JobIndexKey; the Job's completion index
        def identity(role: str, i: int, j: int = j) -> tuple[tuple[str, str, str], ...]:
            return (("labels", "jobset.sigs.k8s.io/replicatedjob-name", role),
                    ("labels", "jobset.sigs.k8s.io/job-index", str(j)), ("labels", COMPLETION_INDEX, str(i)))

        for s in _slots(job, [(rjob["name"], completions, template, main_container(template.get("spec", {})))],
                        {"job": j, "jobs": _whole(rjob.get("replicas", 1), "replicas"), "job_global": n,
                         "total_jobs": total_jobs}, identity):
            slots.append(replace(s, numbers={**s.numbers, "global": g, "total": total}))
            g += 1
    network = spec.get("network") or {}
    return Shape(("network", *sorted(network), f"enableDNSHostnames={network.get('enableDNSHostnames', True)}"),
                 tuple(slots))


SHAPES: Mapping[tuple[str, str], Callable[[Obj], Shape]] = {
    ("batch.volcano.sh/v1alpha1", "Job"): volcano,
    ("kubeflow.org/v1", "PyTorchJob"): pytorchjob,
    ("trainer.kubeflow.org/v1alpha1", "TrainJob"): trainjob,
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"): leaderworkerset,
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): jobset,
}
