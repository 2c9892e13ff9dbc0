"""The pods of a PyTorchJob, as Kubeflow's training-operator makes them, and Run:ai's. Pure.

training-operator v1.9 (kubeflow/training-operator, pkg/controller.v1/pytorch/envvar.go,
master.go, elastic.go): pods and per-pod Services ``<job>-<type>-<i>``; to every container
PYTHONUNBUFFERED=1; with a Master: MASTER_PORT/PET_MASTER_PORT (the ``pytorchjob-port``
of the ``pytorch`` container), MASTER_ADDR/PET_MASTER_ADDR ``<job>-master-0``, WORLD_SIZE
= replicas x nprocPerNode, RANK and PET_NODE_RANK; PET_NPROC_PER_NODE from nprocPerNode;
with an elasticPolicy PET_RDZV_ENDPOINT (rdzvHost or ``<job>-worker-0``, rdzvPort or the
worker's port), PET_RDZV_BACKEND, PET_NNODES ``MIN:MAX``, PET_MAX_RESTARTS, PET_RDZV_CONF,
else PET_NNODES = replicas. Label training.kubeflow.org/replica-index (pkg/common).

Run:ai: a PyTorchJob with schedulerName runai-scheduler, and the job's RUNAI_JOB_NAME,
RUNAI_JOB_UUID and RUNAI_PROJECT (Run:ai docs, "Environment Variables inside a Run:ai
Workload").

Run:ai is the only model here without a real operator running in the tests: its pods name
runai-scheduler, which no module of the cluster tier runs, so their Run:ai variables rest on
this model and the Run:ai documentation alone. Every other model, this module's
training-operator one included, is held to the pods its real operator makes on the real
control plane (tests/kube_jobs.py assert_model_agrees).
"""

from __future__ import annotations

from typing import Sequence

from torchpod.contract import PYTORCHJOB_PORT

from .common import K8S_ENV, Obj, Pod, container_port, last_wins, launcher_args, main_container, node_name, resolve, uid

# Run:ai pods run under its own scheduler (kube.py renders it, the model reads it back).
RUNAI_SCHEDULER = "runai-scheduler"


def _elastic_env(elastic: Obj, worker0: str, worker_port: int, workers) -> list[tuple[str, str]]:
    """What training-operator's elastic.go sets from an elasticPolicy."""
    host = elastic.get("rdzvHost") or worker0
    rport = elastic.get("rdzvPort") or worker_port
    env = [("PET_RDZV_ENDPOINT", f"{host}:{rport}"), ("PET_RDZV_BACKEND", elastic.get("rdzvBackend") or "c10d")]
    if elastic.get("minReplicas") is None and elastic.get("maxReplicas") is None:
        env.append(("PET_NNODES", str(workers)))
    else:
        env.append(("PET_NNODES", f"{elastic.get('minReplicas')}:{elastic.get('maxReplicas')}"))
    if elastic.get("maxRestarts") is not None:
        env.append(("PET_MAX_RESTARTS", str(elastic["maxRestarts"])))
    if elastic.get("rdzvConf"):
        env.append(("PET_RDZV_CONF", ",".join(f"{c['key']}={c['value']}" for c in elastic["rdzvConf"])))
    return env


def pytorchjob(job: Obj, node_names: Sequence[str] = ()) -> list[Pod]:
    name, ns = job["metadata"]["name"], job["metadata"].get("namespace", "default")
    spec = job["spec"]
    replicas = spec["pytorchReplicaSpecs"]
    order = [t for t in ("Master", "Worker") if t in replicas]
    total = sum(int(replicas[t].get("replicas", 1)) for t in order)
    nproc = spec.get("nprocPerNode")
    nproc_int = int(nproc) if nproc is not None and str(nproc).isdigit() else 1
    elastic = spec.get("elasticPolicy")

    def port_of(rtype: str) -> int:
        # the operator's defaulter adds pytorchjob-port when the container has none
        return container_port(main_container(replicas[rtype]["template"]["spec"], "pytorch"), "pytorchjob-port",
                     PYTORCHJOB_PORT)

    pods, k = [], 0
    for rtype in order:
        tmpl_all = replicas[rtype]["template"]
        tmpl = tmpl_all.get("spec", {})
        for i in range(int(replicas[rtype].get("replicas", 1))):
            pod = f"{name}-{rtype.lower()}-{i}"
            labels = {**(tmpl_all.get("metadata", {}).get("labels") or {}),
                      "training.kubeflow.org/job-name": name,
                      "training.kubeflow.org/replica-type": rtype.lower(),
                      "training.kubeflow.org/replica-index": str(i),
                      "training.kubeflow.org/operator-name": "pytorchjob-controller"}
            if rtype == "Master":
                labels["training.kubeflow.org/job-role"] = "master"
            hostnet = bool(tmpl.get("hostNetwork"))
            node = node_names[k] if k < len(node_names) else node_name(k)
            c = main_container(tmpl, "pytorch")
            env = list(K8S_ENV) + resolve(c.get("env"), pod, ns, labels, {}, node)
            env.append(("PYTHONUNBUFFERED", "1"))
            if "Master" in replicas:
                port = str(port_of("Master"))
                master = f"{name}-master-0"
                rank = i + 1 if rtype == "Worker" else i
                env += [("MASTER_PORT", port), ("PET_MASTER_PORT", port),
                        ("MASTER_ADDR", master), ("PET_MASTER_ADDR", master),
                        ("WORLD_SIZE", str(total * nproc_int)), ("RANK", str(rank)), ("PET_NODE_RANK", str(rank))]
            if nproc is not None:
                env.append(("PET_NPROC_PER_NODE", str(nproc)))
            if elastic:
                env += _elastic_env(elastic, f"{name}-worker-0", port_of("Worker"), replicas["Worker"]["replicas"])
            else:
                env.append(("PET_NNODES", str(total)))
            if tmpl.get("schedulerName") == RUNAI_SCHEDULER:
                env += [("RUNAI_JOB_NAME", name), ("RUNAI_JOB_UUID", uid(name)),
                        ("RUNAI_PROJECT", labels.get("project", ""))]
            pods.append(Pod(name=pod, hostname=node if hostnet else pod, dns_names=(pod,),
                            env=last_wins(env), args=launcher_args(c), image=c["image"],
                            labels=tuple(labels.items()), host_network=hostnet))
            k += 1
    return pods
