"""What each operator makes of a rendered manifest: the pods, their names and environment.
Pure: takes the manifest's objects (dicts), returns ``Pod`` values.

One model, used twice: the tests feed every generated manifest through it and hand each
pod's environment to `torchpod plan`; the containers-as-nodes harness (cluster/topology.py)
runs the same pods as containers. Written from the operators' sources:

- Volcano (volcano-sh/volcano, pkg/controllers/job/plugins/): pods ``<job>-<task>-<i>``
  (helpers.MakePodName); ``env`` appends VK_TASK_INDEX and VC_TASK_INDEX (env/env.go);
  ``svc`` sets hostname = pod name and subdomain = job name, one headless Service named
  after the job, and for every task VC_<TASK>_HOSTS (``<pod>.<job>``, comma-separated) and
  VC_<TASK>_NUM, task names upper-cased with '-' -> '_', plus /etc/volcano/<task>.host
  (svc/svc.go GenerateHosts); ``pytorch`` (distributed-framework/pytorch/pytorch.go) adds
  MASTER_ADDR ``<job>-<master>-0.<job>``, MASTER_PORT (--port, else contract.PYTORCHJOB_PORT), WORLD_SIZE (master +
  worker replicas) and RANK (master 0, worker i -> i + 1). minAvailable (job and task) is
  the gang the scheduler waits for, not the pods: every replica is created and listed; the
  admission webhook refuses a job minAvailable above the replicas of all tasks, or a task's
  above its replicas (ed72c7c8, pkg/webhooks/admission/jobs/validate/admit_job.go), and so does
  the model.
- training-operator v1.9 (kubeflow/training-operator, pkg/controller.v1/pytorch/envvar.go,
  master.go, elastic.go): pods and per-pod Services ``<job>-<type>-<i>``; to every container
  PYTHONUNBUFFERED=1; with a Master: MASTER_PORT/PET_MASTER_PORT (the ``pytorchjob-port``
  of the ``pytorch`` container), MASTER_ADDR/PET_MASTER_ADDR ``<job>-master-0``, WORLD_SIZE
  = replicas x nprocPerNode, RANK and PET_NODE_RANK; PET_NPROC_PER_NODE from nprocPerNode;
  with an elasticPolicy PET_RDZV_ENDPOINT (rdzvHost or ``<job>-worker-0``, rdzvPort or the
  worker's port), PET_RDZV_BACKEND, PET_NNODES ``MIN:MAX``, PET_MAX_RESTARTS, PET_RDZV_CONF,
  else PET_NNODES = replicas. Label training.kubeflow.org/replica-index (pkg/common).
- Run:ai: a PyTorchJob with schedulerName runai-scheduler, and the job's RUNAI_JOB_NAME,
  RUNAI_JOB_UUID and RUNAI_PROJECT (Run:ai docs, "Environment Variables inside a Run:ai
  Workload").
- Trainer v2 (kubeflow/trainer v2.3.0, commit 658725bd: pkg/runtime/framework/plugins/
  torch/torch.go, jobset plugin; unchanged on master at 8c0f5059, and nothing v2.4.0's
  release notes list touches it): the runtime's replicated job ``node`` -> pods
  ``<job>-node-0-<i>`` of an Indexed Job (JOB_COMPLETION_INDEX, annotation
  batch.kubernetes.io/job-completion-index), subdomain = job; trainer.env, then PET_NNODES,
  PET_NPROC_PER_NODE (trainer_nproc), PET_NODE_RANK (the completion index), PET_MASTER_ADDR
  ``<job>-node-0-0.<job>``, PET_MASTER_PORT (contract.TRAINER_PORT). What admission
  refuses is refused here too (trainer_admitted): a name that is no DNS-1035 label of at
  most 63 (the TrainJob's CEL rules), a last pod name over 63 with JobSet's 5-character
  suffix (jobset v0.12.0 webhook), a PET_* variable in trainer.env (torch.go Validate).
- LeaderWorkerSet (kubernetes-sigs/lws v0.10.0, commit 2161f38f): per group g a leader
  pod ``<lws>-<g>`` from the leader StatefulSet ``<lws>`` and workers ``<lws>-<g>-<w>``,
  w = 1..size-1, from the worker StatefulSet ``<lws>-<g>`` whose ordinals start at 1
  (pkg/controllers/leaderworkerset_controller.go constructLeaderStatefulSetApplyConfiguration,
  pod_controller.go constructWorkerStatefulSetApplyConfiguration); the leader runs the
  leaderTemplate, else the workerTemplate. Both StatefulSets name the headless Service
  ``<lws>`` (subdomainPolicy Shared, the default; UniquePerReplica: the leader pod's name),
  so hostname = pod name and subdomain = that Service. Labels leaderworkerset.sigs.k8s.io/
  name, group-index, worker-index (0 for the leader), group-key (sha1 of
  ``<ns>/<leader pod>``, pkg/webhooks/pod_webhook.go genGroupUniqueKey); annotations size,
  and leader-name on workers. pkg/utils/pod/pod_utils.go AddLWSVariables puts
  LWS_LEADER_ADDRESS ``<lws>-<g>.<subdomain>.<ns>``, LWS_GROUP_SIZE (the size annotation)
  and LWS_WORKER_INDEX (the worker-index label) first in every container, dropping the
  container's own definitions of those names. The revision-key label and the TPU variables
  (only for pods requesting TPUs) are left out.
- JobSet (kubernetes-sigs/jobset v0.12.0, commit f22e565a): per replicated job r and Job
  index j a Job ``<js>-<r>-<j>`` (pkg/util/placement GenJobName); the webhook
  (pkg/webhooks/jobset_webhook.go Default) makes it Indexed and turns
  network.enableDNSHostnames on; the controller (pkg/controllers/jobset_controller.go
  constructJob, labelAndAnnotateObject) sets the pod template's subdomain to
  network.subdomain, else the JobSet's name (GetSubdomain), and labels and annotates it:
  jobset.sigs.k8s.io/jobset-name, jobset-uid, replicatedjob-name, restart-attempt
  (Status.Restarts, 0 for a new JobSet), replicatedjob-replicas, global-replicas (the Jobs
  over every replicated job), job-index, job-key (sha1 of ``<ns>/<job>``),
  job-global-index (the Job's index over the replicated jobs in spec order), group-name
  (``default``), group-replicas, job-group-index. Kubernetes' Job controller
  (pkg/controller/job/job_controller.go manageJob, indexed_job_utils.go) names each pod
  ``<job>-<i>-<random>``, sets its hostname ``<job>-<i>``, the annotation and label
  batch.kubernetes.io/job-completion-index, and appends JOB_COMPLETION_INDEX (from that
  annotation) to each container that has none. The random suffix and the UID are stand-ins
  (derived from the name).

Kubernetes itself: KUBERNETES_SERVICE_HOST/PORT in every container; for a duplicated
variable the last definition wins; under hostNetwork the pod's hostname is its node's.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from torchpod.contract import PYTORCHJOB_PORT, TRAINER_PORT
from torchpod.errors import InputError

from .. import grammars

# What Kubernetes sets in every container (the API server's Service); the harness's
# non-manifest scenarios (cluster/scenarios.py) set the same.
K8S_ENV = (("KUBERNETES_SERVICE_HOST", "10.96.0.1"), ("KUBERNETES_SERVICE_PORT", "443"))
Obj = Mapping[str, Any]


@dataclass(frozen=True)
class Pod:
    name: str
    hostname: str  # what `hostname` prints in the container
    dns_names: tuple[str, ...]  # names other pods resolve to this one
    env: tuple[tuple[str, str], ...]
    args: tuple[str, ...]
    image: str
    files: tuple[tuple[str, str], ...] = ()
    labels: tuple[tuple[str, str], ...] = field(default=())
    host_network: bool = False

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)


def _uid(name: str) -> str:
    return f"{zlib.crc32(name.encode()):08x}-0000-4000-8000-{zlib.crc32(name[::-1].encode()):012x}"


def _node_name(i: int) -> str:
    return f"gpu-node-{chr(ord('a') + i % 26)}{i // 26 or ''}"


_FIELD = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")


def _resolve(env: Sequence[Obj] | None, pod: str, namespace: str, labels: Mapping[str, str],
             annotations: Mapping[str, str], node: str) -> list[tuple[str, str]]:
    """The manifest's own env entries with downward-API fields resolved as the kubelet would."""
    out = []
    for item in env or ():
        if "value" in item or "valueFrom" not in item:
            out.append((item["name"], str(item.get("value", ""))))
            continue
        ref = (item["valueFrom"] or {}).get("fieldRef")
        if not ref:
            raise InputError(f"env {item['name']}: only value and fieldRef are modelled; got {dict(item['valueFrom'])}")
        path = ref["fieldPath"]
        m = _FIELD.match(path)
        if path == "metadata.name":
            value = pod
        elif path == "metadata.namespace":
            value = namespace
        elif path == "spec.nodeName":
            value = node
        elif m:
            value = (labels if m.group(1) == "labels" else annotations).get(m.group(2), "")
        else:
            raise InputError(f"env {item['name']}: fieldRef {path!r} is not modelled; expected metadata.name, "
                             "metadata.namespace, spec.nodeName or a label/annotation")
        out.append((item["name"], value))
    return out


def _launcher_args(c: Obj) -> tuple[str, ...]:
    """The words torchpod is started with: the model's pods run the image's torchpod, so a
    container must name torchpod as its command, or none (the image's ENTRYPOINT); any other
    command would run something the model does not."""
    command = c.get("command")
    if command not in (None, [], ["torchpod"]):
        raise InputError(f"container {c.get('name', '')}: command {command!r} is not modelled; expected [torchpod] "
                         "or none (the image's torchpod)")
    return tuple(c.get("args") or ())


def _last_wins(pairs: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    merged: dict[str, str] = {}
    for k, v in pairs:
        merged.pop(k, None)
        merged[k] = v
    return tuple(merged.items())


def _main_container(spec: Obj, name: str | None = None) -> Obj:
    containers = spec.get("containers") or []
    if not containers:
        raise InputError("pod template has no containers")
    if name:
        for c in containers:
            if c.get("name") == name:
                return c
    return containers[0]


def _port(container: Obj, port_name: str, default: int) -> int:
    for p in container.get("ports") or ():
        if p.get("name") == port_name:
            return int(p["containerPort"])
    return default


def _flags(args: Sequence[str]) -> dict[str, str]:
    out = {}
    for a in args or ():
        if a.startswith("--") and "=" in a:
            k, v = a[2:].split("=", 1)
            out[k] = v
    return out


def _volcano_admitted(name: str, spec: Obj) -> None:
    """What Volcano's admission webhook refuses about minAvailable (admit_job.go)."""
    total = sum(int(t["replicas"]) for t in spec["tasks"])
    if int(spec.get("minAvailable") or 0) > total:
        raise InputError(f"Volcano Job {name}: minAvailable {spec['minAvailable']} is above the {total} replicas "
                         "of its tasks; expected at most the replicas (the admission webhook refuses it)")
    for t in spec["tasks"]:
        if t.get("minAvailable") is not None and int(t["minAvailable"]) > int(t["replicas"]):
            raise InputError(f"Volcano Job {name}: task {t['name']} minAvailable {t['minAvailable']} is above its "
                             f"{t['replicas']} replicas; expected at most the replicas")


def volcano(job: Obj, node_names: Sequence[str] = ()) -> list[Pod]:
    name, ns = job["metadata"]["name"], job["metadata"].get("namespace", "default")
    spec = job["spec"]
    _volcano_admitted(name, spec)
    plugins = spec.get("plugins") or {}
    tasks = spec["tasks"]
    hosts: dict[str, list[str]] = {}
    for t in tasks:
        tmpl = t["template"].get("spec", {})
        sub = tmpl.get("subdomain") or name
        task = t["name"]
        hosts[task] = [f"{tmpl.get('hostname') or f'{name}-{task}-{i}'}.{sub}" for i in range(t["replicas"])]
    svc_env, files = [], []
    if "svc" in plugins:
        for t in tasks:
            key = t["name"].replace("-", "_")
            svc_env += [(f"VC_{key.upper()}_HOSTS", ",".join(hosts[t["name"]])),
                        (f"VC_{key.upper()}_NUM", str(len(hosts[t["name"]])))]
            files.append((f"/etc/volcano/{key}.host", "\n".join(hosts[t["name"]])))
    torch_flags = _flags(plugins.get("pytorch", ())) if "pytorch" in plugins else None
    master_task = (torch_flags or {}).get("master", "master")
    worker_task = (torch_flags or {}).get("worker", "worker")
    pods, k = [], 0
    group = f"{name}-{_uid(name)}"  # the PodGroup's name: job name + job UID
    for t in tasks:
        tmpl = t["template"].get("spec", {})
        for i in range(t["replicas"]):
            pod = f"{name}-{t['name']}-{i}"
            labels = {"volcano.sh/job-name": name, "volcano.sh/task-spec": t["name"]}
            annotations = {"scheduling.k8s.io/group-name": group, "volcano.sh/task-index": str(i)}
            hostnet = bool(tmpl.get("hostNetwork"))
            node = node_names[k] if k < len(node_names) else _node_name(k)
            c = _main_container(tmpl)
            env = list(K8S_ENV) + _resolve(c.get("env"), pod, ns, labels, annotations, node)
            if "env" in plugins:
                env += [("VK_TASK_INDEX", str(i)), ("VC_TASK_INDEX", str(i))]
            env += svc_env
            if torch_flags is not None and t["name"] in (master_task, worker_task):
                total = sum(x["replicas"] for x in tasks if x["name"] in (master_task, worker_task))
                env += [("MASTER_ADDR", hosts[master_task][0]),
                        ("MASTER_PORT", torch_flags.get("port", str(PYTORCHJOB_PORT))),
                        ("WORLD_SIZE", str(total)),
                        ("RANK", str(i + 1 if t["name"] == worker_task else 0))]
            listed = hosts[t["name"]][i]
            pods.append(Pod(name=pod, hostname=node if hostnet else (tmpl.get("hostname") or pod),
                            dns_names=(listed,), env=_last_wins(env), args=_launcher_args(c),
                            image=c["image"], files=tuple(files), labels=tuple(labels.items()),
                            host_network=hostnet))
            k += 1
    return pods


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
        return _port(_main_container(replicas[rtype]["template"]["spec"], "pytorch"), "pytorchjob-port",
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
            node = node_names[k] if k < len(node_names) else _node_name(k)
            c = _main_container(tmpl, "pytorch")
            env = list(K8S_ENV) + _resolve(c.get("env"), pod, ns, labels, {}, node)
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
                env += [("RUNAI_JOB_NAME", name), ("RUNAI_JOB_UUID", _uid(name)),
                        ("RUNAI_PROJECT", labels.get("project", ""))]
            pods.append(Pod(name=pod, hostname=node if hostnet else pod, dns_names=(pod,),
                            env=_last_wins(env), args=_launcher_args(c), image=c["image"],
                            labels=tuple(labels.items()), host_network=hostnet))
            k += 1
    return pods


# What the torch plugin sets and so refuses in trainer.env (pkg/constants TorchRunReservedEnvNames).
TRAINER_RESERVED_ENV = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")
_TRAINJOB_NAME = grammars.DNS1035_LABEL  # the TrainJob's CEL rule
_QUANTITY = re.compile(r"([0-9]+)(?:\.([0-9]+))?(m?)", re.ASCII)


def _ceil_quantity(text) -> int:
    """A CPU or GPU quantity rounded up to a whole number, as resource.Quantity.Value() does:
    whole or decimal numbers and millis (``500m`` is 1); other suffixes are not modelled."""
    m = _QUANTITY.fullmatch(str(text))
    if m is None:
        raise InputError(f"resource quantity {text!r} is not modelled; expected a number or millis, e.g. 4 or 500m")
    whole, frac, milli = int(m.group(1)), m.group(2) or "", m.group(3)
    if milli:
        return -(-whole // 1000) if not frac else -(-(whole + 1) // 1000)
    return whole + (1 if frac.strip("0") else 0)


def trainer_nproc(trainer: Obj) -> str:
    """PET_NPROC_PER_NODE as the torch plugin sets it (torch.go EnforceMLPolicy): the
    TrainJob's numProcPerNode (an int32 since v2.2, which removed the runtime's), else
    ``auto``, which becomes the CPU count per node (at least 1) when resourcesPerNode asks
    for no GPU (runtime.GetNumGPUPerNode: the first resource whose name holds "gpu",
    requests before limits; getNumCPUPerNode: requests.cpu, else limits.cpu)."""
    given = trainer.get("numProcPerNode")
    if given is not None:
        if isinstance(given, bool) or not isinstance(given, int) or given < 1:
            raise InputError(f"TrainJob trainer.numProcPerNode {given!r}: expected a whole number >= 1 (an int32 "
                             "since Trainer v2.2; 'auto' is the default when it is left out)")
        return str(given)
    res = trainer.get("resourcesPerNode") or {}
    for part in ("requests", "limits"):
        gpus = [q for k, q in (res.get(part) or {}).items() if "gpu" in k.lower()]
        if gpus and _ceil_quantity(gpus[0]):
            return "auto"
    cpu = (res.get("requests") or {}).get("cpu") or (res.get("limits") or {}).get("cpu") or 0
    return str(max(1, _ceil_quantity(cpu)))


def trainer_admitted(name: str, trainer: Obj) -> None:
    """What the API server and the webhooks refuse about a TrainJob (see the docstring)."""
    if not _TRAINJOB_NAME.fullmatch(name) or len(name) > 63:
        raise InputError(f"TrainJob {name!r}: metadata.name must be a DNS-1035 label of at most 63 characters "
                         "(the TrainJob's CEL rules)")
    last = f"{name}-node-0-{int(trainer.get('numNodes', 1)) - 1}-abcde"
    if len(last) > 63:
        raise InputError(f"TrainJob {name}: its JobSet's longest pod name {last!r} is over 63 characters; "
                         "JobSet's webhook refuses it: expected a shorter name")
    reserved = sorted({e.get("name") for e in trainer.get("env") or ()} & set(TRAINER_RESERVED_ENV))
    if reserved:
        raise InputError(f"TrainJob {name}: trainer.env sets {', '.join(reserved)}, which the torch plugin sets; "
                         "Trainer's webhook refuses it: leave them out")


def trainjob(job: Obj, node_names: Sequence[str] = ()) -> list[Pod]:
    name, ns = job["metadata"]["name"], job["metadata"].get("namespace", "default")
    ref = job["spec"].get("runtimeRef", {})
    if ref.get("name") != "torch-distributed":
        raise InputError(f"TrainJob {name}: runtimeRef {ref.get('name')!r} is not modelled; expected torch-distributed")
    trainer = job["spec"].get("trainer") or {}
    trainer_admitted(name, trainer)
    n = int(trainer.get("numNodes", 1))
    nproc = trainer_nproc(trainer)
    master = f"{name}-node-0-0.{name}"
    pods = []
    for i in range(n):
        pod = f"{name}-node-0-{i}"
        annotations = {"batch.kubernetes.io/job-completion-index": str(i)}
        labels = {"jobset.sigs.k8s.io/jobset-name": name, "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
        node = node_names[i] if i < len(node_names) else _node_name(i)
        env = list(K8S_ENV) + [("JOB_COMPLETION_INDEX", str(i))]
        env += _resolve(trainer.get("env"), pod, ns, labels, annotations, node)
        env += [("PET_NNODES", str(n)), ("PET_NPROC_PER_NODE", str(nproc)), ("PET_NODE_RANK", str(i)),
                ("PET_MASTER_ADDR", master), ("PET_MASTER_PORT", str(TRAINER_PORT))]
        pods.append(Pod(name=pod, hostname=pod, dns_names=(f"{pod}.{name}",), env=_last_wins(env),
                        args=_launcher_args(trainer), image=trainer["image"],
                        labels=tuple(labels.items())))
    return pods


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


# LeaderWorkerSet's names (kubernetes-sigs/lws api/leaderworkerset/v1/leaderworkerset_types.go).
LWS = "leaderworkerset.sigs.k8s.io/"
LWS_ENV = ("LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE", "LWS_WORKER_INDEX")


def _lws_pod(name: str, ns: str, group: int, worker: int, size: int, tmpl: Obj, sub: str,
             node: str) -> Pod:
    """One pod of group ``group``: the leader (worker 0) or a worker."""
    leader = f"{name}-{group}"
    pod = leader if worker == 0 else f"{leader}-{worker}"
    labels = {f"{LWS}name": name, f"{LWS}group-index": str(group), f"{LWS}worker-index": str(worker),
              f"{LWS}group-key": _sha1(f"{ns}/{leader}")}
    annotations = {f"{LWS}size": str(size)}
    if worker:
        annotations[f"{LWS}leader-name"] = leader
    spec = tmpl.get("spec", {})
    hostnet = bool(spec.get("hostNetwork"))
    c = _main_container(spec)
    own = [(k, v) for k, v in _resolve(c.get("env"), pod, ns, labels, annotations, node) if k not in LWS_ENV]
    lws_env = [("LWS_LEADER_ADDRESS", f"{leader}.{sub}.{ns}"), ("LWS_GROUP_SIZE", str(size)),
               ("LWS_WORKER_INDEX", str(worker))]
    return Pod(name=pod, hostname=node if hostnet else pod, dns_names=(f"{pod}.{sub}", f"{pod}.{sub}.{ns}"),
               env=_last_wins(list(K8S_ENV) + lws_env + own), args=_launcher_args(c),
               image=c["image"], labels=tuple(labels.items()), host_network=hostnet)


def leaderworkerset(lws: Obj, node_names: Sequence[str] = ()) -> list[Pod]:
    name, ns = lws["metadata"]["name"], lws["metadata"].get("namespace", "default")
    spec = lws["spec"]
    template = spec["leaderWorkerTemplate"]
    size = int(template.get("size", 1))  # the CRD's defaults: size 1, replicas 1
    policy = (spec.get("networkConfig") or {}).get("subdomainPolicy", "Shared")
    pods: list[Pod] = []
    for group in range(int(spec.get("replicas", 1))):
        sub = f"{name}-{group}" if policy == "UniquePerReplica" else name
        for worker in range(size):
            tmpl = template.get("leaderTemplate") if worker == 0 else None
            k = len(pods)
            node = node_names[k] if k < len(node_names) else _node_name(k)
            pods.append(_lws_pod(name, ns, group, worker, size, tmpl or template["workerTemplate"], sub, node))
    return pods


# JobSet's names (kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go, pkg/constants).
JOBSET = "jobset.sigs.k8s.io/"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


def _indexed_pods(rjob: Obj, job: str) -> int:
    """How many pods the Indexed Job runs at once: all of its completions, or refused."""
    spec = rjob["template"].get("spec", {})
    mode = spec.get("completionMode", "Indexed")  # JobSet's webhook default
    completions, parallelism = spec.get("completions"), spec.get("parallelism", 1)
    if mode != "Indexed" or completions is None or int(parallelism) != int(completions):
        raise InputError(f"JobSet Job {job}: completionMode {mode!r}, completions {completions!r}, parallelism "
                         f"{parallelism!r} is not modelled; expected an Indexed Job with completions = parallelism "
                         "(every pod of the job running at once)")
    return int(completions)


def _jobset_meta(name: str, ns: str, rjobs: Sequence[Obj], r: int, j: int) -> dict[str, str]:
    """What labelAndAnnotateObject puts on the pod template of Job j of replicated job r,
    as labels and as annotations alike."""
    rjob = rjobs[r]
    group = rjob.get("groupName", "default")
    in_group = [x for x in rjobs if x.get("groupName", "default") == group]
    job = f"{name}-{rjob['name']}-{j}"
    return {f"{JOBSET}jobset-name": name, f"{JOBSET}jobset-uid": _uid(name),
            f"{JOBSET}replicatedjob-name": rjob["name"], f"{JOBSET}restart-attempt": "0",
            f"{JOBSET}replicatedjob-replicas": str(rjob.get("replicas", 1)),
            f"{JOBSET}global-replicas": str(sum(int(x.get("replicas", 1)) for x in rjobs)),
            f"{JOBSET}job-index": str(j), f"{JOBSET}job-key": _sha1(f"{ns}/{job}"),
            f"{JOBSET}job-global-index": str(sum(int(x.get("replicas", 1)) for x in rjobs[:r]) + j),
            f"{JOBSET}group-name": group,
            f"{JOBSET}group-replicas": str(sum(int(x.get("replicas", 1)) for x in in_group)),
            f"{JOBSET}job-group-index": str(sum(int(x.get("replicas", 1)) for x in in_group[:in_group.index(rjob)])
                                            + j)}


def _jobset_pod(job: str, i: int, ns: str, tmpl: Obj, meta: Mapping[str, str], sub: str | None,
                node: str) -> Pod:
    """Pod ``i`` of the Indexed Job ``job``, as Kubernetes' Job controller creates it."""
    host = f"{job}-{i}"
    labels = {**(tmpl.get("metadata", {}).get("labels") or {}), **meta, COMPLETION_INDEX: str(i),
              "batch.kubernetes.io/job-name": job, "job-name": job}
    annotations = {**(tmpl.get("metadata", {}).get("annotations") or {}), **meta, COMPLETION_INDEX: str(i)}
    pod = f"{host}-{_uid(host)[:5]}"  # generateName <job>-<i>-: the suffix is random
    spec = tmpl.get("spec", {})
    hostnet = bool(spec.get("hostNetwork"))
    c = _main_container(spec)
    env = list(K8S_ENV) + _resolve(c.get("env"), pod, ns, labels, annotations, node)
    if not any(item.get("name") == "JOB_COMPLETION_INDEX" for item in c.get("env") or ()):
        env.append(("JOB_COMPLETION_INDEX", str(i)))
    names = (f"{host}.{sub}", f"{host}.{sub}.{ns}") if sub else ()
    return Pod(name=pod, hostname=node if hostnet else host, dns_names=names, env=_last_wins(env),
               args=_launcher_args(c), image=c["image"], labels=tuple(labels.items()),
               host_network=hostnet)


def jobset(js: Obj, node_names: Sequence[str] = ()) -> list[Pod]:
    name, ns = js["metadata"]["name"], js["metadata"].get("namespace", "default")
    spec = js["spec"]
    network = spec.get("network") or {}
    # the webhook turns DNS hostnames on unless the JobSet turns them off
    sub = (network.get("subdomain") or name) if network.get("enableDNSHostnames", True) else None
    rjobs = spec["replicatedJobs"]
    pods: list[Pod] = []
    for r, rjob in enumerate(rjobs):
        for j in range(int(rjob.get("replicas", 1))):
            job = f"{name}-{rjob['name']}-{j}"
            meta = _jobset_meta(name, ns, rjobs, r, j)
            for i in range(_indexed_pods(rjob, job)):
                k = len(pods)
                node = node_names[k] if k < len(node_names) else _node_name(k)
                pods.append(_jobset_pod(job, i, ns, rjob["template"]["spec"]["template"], meta, sub, node))
    return pods


MODELS = {
    ("batch.volcano.sh/v1alpha1", "Job"): volcano,
    ("kubeflow.org/v1", "PyTorchJob"): pytorchjob,
    ("trainer.kubeflow.org/v1alpha1", "TrainJob"): trainjob,
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"): leaderworkerset,
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): jobset,
}


def job_object(docs: Sequence[Obj]) -> Obj:
    """The one training job among a manifest's objects (Services and an etcd Pod may sit beside it)."""
    jobs = [d for d in docs if d and (d.get("apiVersion"), d.get("kind")) in MODELS]
    if len(jobs) != 1:
        kinds = ", ".join(f"{d.get('kind')}" for d in docs if d)
        raise InputError("expected exactly one Volcano Job, PyTorchJob, TrainJob, LeaderWorkerSet or JobSet in "
                         f"the manifest; found {kinds or 'nothing'}")
    return jobs[0]


def pods(docs: Sequence[Obj], node_names: Sequence[str] = ()) -> list[Pod]:
    """The pods the operator creates for the manifest's job, in node order."""
    job = job_object(docs)
    return MODELS[(job["apiVersion"], job["kind"])](job, node_names)
