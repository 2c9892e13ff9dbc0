"""Kubernetes objects for one JobSpec: Volcano Job, training-operator PyTorchJob, Trainer
v2 TrainJob, and the Run:ai command line with the PyTorchJob it corresponds to. Pure:
returns dicts; render.py turns them into files.

Every kind's pods run the pod template of ``podtemplate`` (the container, its security
context and volumes), which each builder here places in its own object.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from torchpod.contract import ETCD_PORT, JOBSET_LABEL_ENV

from . import jobs
from . import resources as resources_mod
from .jobs import RESTARTS
from .models.runai import RUNAI_SCHEDULER  # the operator model reads the same name
from .podtemplate import (
    LAUNCHER,
    Obj,
    container,
    launcher_args,
    pod_security_context,
    pod_spec,
    site_pod_fields,
    user_env,
    volumes,
)
from .spec import NON_ROOT_ID, JobSpec


def _meta(spec: JobSpec, name: str | None = None, **extra) -> Obj:
    return {"name": name or spec.name, "namespace": spec.namespace, **extra}


# torchrun restarts of the worker group an elastic job allows (elasticPolicy.maxRestarts,
# PET_MAX_RESTARTS): each lost or returning node costs one. The job's own restarts after a
# failure are RESTARTS (kinds/record.py), the number each kind's header states.
ELASTIC_RESTARTS = RESTARTS


def _volcano_elastic(spec: JobSpec, job_spec: Obj, tasks: list[Obj]) -> None:
    """A worker-only Volcano Job that runs on MIN of its MAX pods (--nodes MIN:MAX): the
    gang is MIN, on the job and on its task (the admission webhook defaults a task's
    minAvailable to its replicas: volcano-sh/volcano ed72c7c8, pkg/webhooks/admission/jobs/
    mutate/mutate_job.go); no RestartJob policy, so a lost pod does not restart the others
    (applyPolicies' default action is SyncJob, which recreates the pod: pkg/controllers/job/
    job_controller_util.go); and the launcher is told MIN:MAX and the restarts in torchrun's
    own PET_NNODES and PET_MAX_RESTARTS, since the svc plugin lists all MAX hosts."""
    job_spec["minAvailable"] = spec.min_nodes
    del job_spec["policies"]
    told = [{"name": "PET_NNODES", "value": spec.nnodes}, {"name": "PET_MAX_RESTARTS", "value": str(ELASTIC_RESTARTS)}]
    for i, task in enumerate(tasks):
        containers = task["template"]["spec"]["containers"]
        c = containers[0]
        head = {k: c[k] for k in ("name", "image", "imagePullPolicy", "command", "args")}  # container() puts env next
        containers[0] = {**head, "env": [*c.get("env", []), *told],
                         **{k: v for k, v in c.items() if k not in head and k != "env"}}
        tasks[i] = {"name": task["name"], "replicas": task["replicas"], "minAvailable": spec.min_nodes,
                    "template": task["template"]}


def volcano_job(spec: JobSpec) -> Obj:
    """batch.volcano.sh/v1alpha1 Job: gang-scheduled (minAvailable = nodes), env + svc
    plugins; master + worker tasks with the pytorch plugin for a kind with a master task
    (JobKind.master_task); with --nodes MIN:MAX, elastic (_volcano_elastic)."""
    with_master = jobs.kind(spec.scheduler).master_task
    hostnet = spec.rdma == "hostnetwork"
    # Under hostNetwork the hostname is the node's; master+worker pods then find their task
    # by POD_NAME. Worker-only pods need nothing: VC_TASK_INDEX indexes VC_WORKER_HOSTS.
    downward = (("POD_NAME", "metadata.name"),) if with_master and hostnet else ()
    plugins: Obj = {"env": [], "svc": ["--publish-not-ready-addresses=true"]}
    tasks = []
    if with_master:
        plugins["pytorch"] = ["--master=master", "--worker=worker", f"--port={spec.port}"]
        counts: tuple[tuple[str, int], ...] = (("master", 1), ("worker", spec.nodes - 1))
    else:
        counts = (("worker", spec.nodes),)
    # Never: a failed pod's phase is Failed, the PodFailed event Volcano's RestartJob policy
    # acts on and maxRetry counts (pkg/controllers/job/state/restarting.go, v1.10.0: Failed once
    # RetryCount reaches maxRetry); under OnFailure the kubelet restarts the container in place,
    # the pod never fails and the job restarts forever. The elastic job, which has no policy,
    # leaves a failed pod Failed, and once every pod has ended it is Completed when MIN of them
    # succeeded, else Failed (pkg/controllers/job/state/running.go); a deleted pod is made again.
    policy = "Never"
    for task, replicas in counts:
        tasks.append({"name": task, "replicas": replicas,
                      "template": {"spec": {**pod_spec(spec, downward=downward), "restartPolicy": policy}}})
    job_spec: Obj = {"schedulerName": "volcano", "minAvailable": spec.nodes, "maxRetry": RESTARTS}
    if spec.queue:
        job_spec["queue"] = spec.queue
    if spec.priority_class:  # the job's own, which vc-scheduler orders jobs and preempts by, beside the pods'
        job_spec["priorityClassName"] = spec.priority_class
    job_spec.update({
        "plugins": plugins,
        # a lost pod ends the rendezvous for everyone: restart the whole gang
        "policies": [{"event": "PodEvicted", "action": "RestartJob"},
                     {"event": "PodFailed", "action": "RestartJob"}],
        "tasks": tasks,
    })
    if spec.min_nodes is not None:
        _volcano_elastic(spec, job_spec, tasks)
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": _meta(spec), "spec": job_spec}


def pytorch_job(spec: JobSpec, *, elastic: bool, labels: Obj | None = None,
                scheduler_name: str | None = None) -> Obj:
    """kubeflow.org/v1 PyTorchJob: Master + Workers, or worker-only with an elasticPolicy
    (minReplicas MIN of --nodes MIN:MAX, else nodes; maxReplicas and Worker replicas nodes)."""
    hostnet = spec.rdma == "hostnetwork"
    downward: tuple[tuple[str, str], ...] = ()
    if hostnet and scheduler_name != RUNAI_SCHEDULER:  # torchpod's Run:ai detector reads no POD_NAME
        downward = (("POD_NAME", "metadata.name"),)
        if elastic:
            downward = (("REPLICA_INDEX", "metadata.labels['training.kubeflow.org/replica-index']"),) + downward
    etcd_by_operator = elastic and spec.rdzv == "etcd"
    template_spec = pod_spec(spec, downward=downward,
                             args=launcher_args(spec, rdzv_from_operator=etcd_by_operator))
    if scheduler_name:
        template_spec = {"schedulerName": scheduler_name, **template_spec}
    template: Obj = {"spec": template_spec}
    if labels:
        template = {"metadata": {"labels": dict(labels)}, **template}

    def replica(n: int) -> Obj:
        return {"replicas": n, "restartPolicy": "OnFailure", "template": template}

    # training-operator v1.8.1 fails the job once its OnFailure pods' container restarts, summed
    # over the running pods, reach backoffLimit (pkg/core/job.go, PastBackoffLimit); unset, a
    # script that always fails restarts forever while holding every GPU
    job_spec: Obj = {"nprocPerNode": str(spec.nproc), "runPolicy": {"backoffLimit": RESTARTS}}
    if elastic:
        policy: Obj = {"minReplicas": spec.min_nodes or spec.nodes, "maxReplicas": spec.nodes,
                       "maxRestarts": ELASTIC_RESTARTS}
        if spec.rdzv == "etcd":
            host, port = spec.etcd_endpoint.rsplit(":", 1)
            policy.update({"rdzvBackend": "etcd-v2", "rdzvHost": host, "rdzvPort": int(port)})
        else:
            policy["rdzvBackend"] = "c10d"
        job_spec["elasticPolicy"] = policy
        job_spec["pytorchReplicaSpecs"] = {"Worker": replica(spec.nodes)}
    else:
        replicas = {"Master": replica(1)}
        if spec.nodes > 1:
            replicas["Worker"] = replica(spec.nodes - 1)
        job_spec["pytorchReplicaSpecs"] = replicas
    meta = _meta(spec, labels=dict(labels)) if labels else _meta(spec)
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": meta, "spec": job_spec}


def pytorch_job_fixed(spec: JobSpec) -> Obj:
    """A PyTorchJob of Master and Workers (pytorch_job)."""
    return pytorch_job(spec, elastic=False)


def pytorch_job_elastic(spec: JobSpec) -> Obj:
    """A worker-only PyTorchJob with an elasticPolicy (pytorch_job)."""
    return pytorch_job(spec, elastic=True)


# Who owns the TrainJob's runtime patch. Trainer's webhook asks a domain-prefixed path (an
# RFC 1123 subdomain, "/", then URI path characters: trainer v2.3.0,
# pkg/runtime/framework/plugins/jobset/jobset.go, validation.IsDomainPrefixedPath), as Kueue's
# "kueue.x-k8s.io/manager"; a plain "torchpod" is refused at admission.
TRAINJOB_PATCH_MANAGER = "torchpod.io/manifests"


def train_job(spec: JobSpec) -> Obj:
    """trainer.kubeflow.org/v1alpha1 TrainJob on the torch-distributed ClusterTrainingRuntime.
    What a TrainJob cannot say directly (securityContext, /dev/shm) goes in runtimePatches,
    whose pod fields are the ones the v2.3 CRD allows (no hostNetwork)."""
    trainer: Obj = {"image": spec.image, "command": list(LAUNCHER), "args": launcher_args(spec),
                    "numNodes": spec.nodes,
                    # explicit: the torch plugin's default "auto" would be the CPU count on a CPU job.
                    # The TrainJob's own field, kept when v2.2 removed the runtime's
                    # mlPolicy.torch.numProcPerNode (kubeflow/trainer#3239, torch.go EnforceMLPolicy)
                    "numProcPerNode": spec.nproc}
    if user_env(spec):
        trainer["env"] = user_env(spec)
    resources = container(spec).get("resources")
    if resources:
        trainer["resourcesPerNode"] = resources
    node_container: Obj = {"name": "node", "volumeMounts": container(spec)["volumeMounts"]}
    security = container(spec).get("securityContext")
    if security:
        node_container["securityContext"] = security
    patch = {"manager": TRAINJOB_PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{
        "name": "node", "template": {"spec": {"template": {"spec": {
            **site_pod_fields(spec), "securityContext": pod_security_context(spec), "containers": [node_container],
            "volumes": volumes(spec)}}}}}]}}}}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": _meta(spec),
        "spec": {"runtimeRef": {"name": "torch-distributed", "apiGroup": "trainer.kubeflow.org",
                                "kind": "ClusterTrainingRuntime"},
                 "trainer": trainer, "runtimePatches": [patch]},
    }


def runai_job(spec: JobSpec) -> Obj:
    """The PyTorchJob `runai training pytorch submit` creates (Run:ai schedules it with its
    own scheduler and labels it with the project)."""
    return pytorch_job(spec, elastic=False, labels={"project": spec.project}, scheduler_name=RUNAI_SCHEDULER)


def runai_command(spec: JobSpec) -> list[str]:
    """The Run:ai CLI (v2.18+ `runai training pytorch submit`) line for the same job: the
    pods' CPUs and memory as the CLI's --cpu-core-request/-limit and --cpu-memory-request/
    -limit (Run:ai CLI reference, docs.nvidia.com/run-ai, runai-training-pytorch-submit)."""
    argv = ["runai", "training", "pytorch", "submit", spec.name, "-p", spec.project, "-i", spec.image,
            "--workers", str(spec.nodes - 1)]
    if spec.gpus_per_node:
        argv += ["-g", str(spec.gpus_per_node)]
    node = spec.per_node
    memory = resources_mod.kube_quantity(node.memory_mi)
    argv += ["--cpu-core-request", str(node.cpus), "--cpu-core-limit", str(node.cpus),
             "--cpu-memory-request", memory, "--cpu-memory-limit", memory, "--large-shm"]
    if spec.rdma == "hostnetwork":
        argv += ["--host-network"]
    if spec.rdma != "none":
        argv += ["--capability", "IPC_LOCK"]
    if spec.rdma == "device-plugin":
        argv += ["--extended-resource", f"{spec.rdma_resource}=1"]
    for entry in user_env(spec):
        argv += ["-e", f"{entry['name']}={entry['value']}"]
    # --command: the words after -- replace the image's ENTRYPOINT (runai training pytorch submit)
    return argv + ["--command", "--", *LAUNCHER, *launcher_args(spec)]


@dataclass(frozen=True)
class CliLine:
    """A CLI line a kind writes beside its manifest (JobKind.cli): its builder, and the comment
    lines above it ({manifest}: the manifest's file name)."""

    build: Callable[[JobSpec], list[str]]
    notes: tuple[str, ...]


# The Run:ai CLI line, which a Run:ai record names (JobKind.cli).
RUNAI_CLI = CliLine(runai_command, (
    "The Run:ai CLI line for the job; {manifest} is the PyTorchJob it corresponds to.",
    "Flags as in the Run:ai CLI reference (`runai training pytorch submit`, v2.18+).",
))


# The c10d port's name on LeaderWorkerSet and JobSet pods: no operator reads it (the
# launcher builds the endpoint with torchpod's own port), it documents the pod.
RDZV_PORT_NAME = "c10d-rdzv"


def leader_worker_set(spec: JobSpec) -> Obj:
    """leaderworkerset.x-k8s.io/v1 LeaderWorkerSet: one group of --nodes pods, the leader
    and its workers from the one workerTemplate (no leaderTemplate: the leader runs the
    same `torchpod run`). LWS_* tell each pod its place; the launcher reads no POD_NAME, so
    hostNetwork needs no downward API. A StatefulSet's pods restart Always: the group is
    recreated whenever one restarts (restartPolicy RecreateGroupOnPodRestart), and again
    after the script ends, so delete the LeaderWorkerSet when the run is over."""
    template = {"size": spec.nodes, "restartPolicy": "RecreateGroupOnPodRestart",
                "workerTemplate": {"spec": pod_spec(spec, port_name=RDZV_PORT_NAME)}}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": _meta(spec),
            "spec": {"replicas": 1, "startupPolicy": "LeaderCreated", "leaderWorkerTemplate": template,
                     "networkConfig": {"subdomainPolicy": "Shared"}}}


def job_set(spec: JobSpec) -> Obj:
    """jobset.x-k8s.io/v1alpha2 JobSet: one replicated job ``node`` of one Indexed Job that
    runs all --nodes pods at once (completions = parallelism), pods named
    ``<name>-node-0-<i>`` in the subdomain ``<name>``. JobSet sets no variable: its labels
    reach the launcher by the downward API (contract.JOBSET_LABEL_ENV), and, since no pod
    can tell its Job's parallelism, the node count by ``--nnodes``. A failed pod fails its
    Job (backoffLimit 0, restartPolicy Never) and the JobSet recreates every Job, as the
    rendezvous must restart for everyone (failurePolicy.maxRestarts)."""
    downward = tuple((env, f"metadata.labels['{label}']") for env, label in JOBSET_LABEL_ENV.items())
    args = ["run", "--nnodes", str(spec.nodes), *launcher_args(spec)[1:]]
    pod = {**pod_spec(spec, downward=downward, args=args, port_name=RDZV_PORT_NAME), "restartPolicy": "Never"}
    job = {"completionMode": "Indexed", "completions": spec.nodes, "parallelism": spec.nodes, "backoffLimit": 0,
           "template": {"spec": pod}}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": _meta(spec),
            "spec": {"network": {"enableDNSHostnames": True, "subdomain": spec.name, "publishNotReadyAddresses": True},
                     "failurePolicy": {"maxRestarts": RESTARTS},
                     "replicatedJobs": [{"name": "node", "replicas": 1, "template": {"spec": job}}]}}


def compute_domain(spec: JobSpec) -> Obj:
    """resource.nvidia.com/v1beta1 ComputeDomain (NVIDIA/k8s-dra-driver-gpu v25.12.0,
    api/nvidia.com/resource/v1beta1/computedomain.go): the IMEX domain the job's pods share
    over multi-node NVLink. Its controller makes the ResourceClaimTemplate named in
    channel.resourceClaimTemplate.name in the ComputeDomain's namespace (cmd/compute-domain-
    controller/computedomain.go, resourceclaimtemplate.go); each pod's claim from it gets one
    IMEX channel (allocationMode Single, the default). numNodes is --nodes: the size the
    domain reports Ready at, and with IMEXDaemonsWithDNSNames off the daemons it waits for."""
    channel = {"resourceClaimTemplate": {"name": spec.compute_domain_channel}}
    return {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain",
            "metadata": _meta(spec, spec.compute_domain), "spec": {"numNodes": spec.nodes, "channel": channel}}


def etcd_objects(spec: JobSpec) -> list[Obj]:
    """One etcd serving the v2 API and a Service in front of it (``<job>-etcd:ETCD_PORT``)."""
    labels = {"app.kubernetes.io/name": "etcd", "app.kubernetes.io/instance": spec.etcd_service}
    pod = {
        "apiVersion": "v1", "kind": "Pod", "metadata": _meta(spec, spec.etcd_service, labels=labels),
        "spec": {"containers": [{
            "name": "etcd", "image": spec.etcd_image,
            "command": ["etcd", "--enable-v2", "--data-dir", "/var/lib/etcd",
                        "--listen-client-urls", f"http://0.0.0.0:{ETCD_PORT}",
                        "--advertise-client-urls", f"http://{spec.etcd_service}:{ETCD_PORT}"],
            "ports": [{"name": "client", "containerPort": ETCD_PORT, "protocol": "TCP"}],
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                                "runAsNonRoot": True, "readOnlyRootFilesystem": True},
            "volumeMounts": [{"name": "data", "mountPath": "/var/lib/etcd"}],
        }], "volumes": [{"name": "data", "emptyDir": {}}], "restartPolicy": "Always",
            # etcd writes only its data directory: any non-root user will do (restricted)
            "securityContext": {"runAsNonRoot": True, "runAsUser": NON_ROOT_ID, "runAsGroup": NON_ROOT_ID,
                                "fsGroup": NON_ROOT_ID, "seccompProfile": {"type": "RuntimeDefault"}}},
    }
    service = {
        "apiVersion": "v1", "kind": "Service", "metadata": _meta(spec, spec.etcd_service, labels=labels),
        "spec": {"selector": labels,
                 "ports": [{"name": "client", "port": ETCD_PORT, "targetPort": ETCD_PORT, "protocol": "TCP"}]},
    }
    return [service, pod]


def objects(spec: JobSpec) -> list[Obj]:
    """Every object to apply, in apply order (etcd before the job that needs it)."""
    out = etcd_objects(spec) if spec.etcd_server else []
    if spec.mnnvl:  # the channel template must exist before the job's pods claim it
        out.insert(0, compute_domain(spec))
    return out + [jobs.kind(spec.scheduler).renderer(spec)]  # the builder the record names
