"""The pod template every Kubernetes kind runs its nodes in: the training container, its
security context, its volumes and the pod's own fields. Pure: returns dicts; each kind's
object (``kube``) wraps them.

What a pod carries, and what it leaves out on purpose:

- The container names its command, ``torchpod`` (LAUNCHER), with ``args: [run, --, SCRIPT,
  ARGS...]``: no shell, no torchrun flags, and any image with torchpod on its PATH runs it
  whatever its ENTRYPOINT (an NGC image's is a banner script). The launcher reads what the
  operator injects.
- Downward-API variables only where the launcher reads them: POD_NAME (Volcano
  master+worker and Kubeflow under hostNetwork, where the pod's hostname is the node's) and
  REPLICA_INDEX (Kubeflow elastic under hostNetwork: the operator gives such a pod no index).
- RDMA with least privilege: capability IPC_LOCK only; ``privileged`` only when asked.
  hostNetwork mode mounts /dev/infiniband from the host (OKE's recipe, oracle-quickstart/
  oci-hpc-oke); device-plugin mode asks for the plugin's resource instead (no hostPath).
- A shape preset is named (TORCHPOD_PRESET), not pasted: the launcher applies its NCCL
  settings, so they are written once, in presets.json.
- GB200 multi-node NVLink (--mnnvl): a ComputeDomain first (kube), and in every pod template the
  claim on the channel template it makes (pod spec.resourceClaims and the training
  container's resources.claims), beside the GPUs the pod asks for as before.
"""

from __future__ import annotations

from typing import Any

from torchpod.contract import ENV_PRESET

from . import resources as resources_mod
from .spec import JobSpec

Obj = dict[str, Any]

CONTAINER = "pytorch"  # training-operator reads the port from the container named pytorch
PORT_NAME = "pytorchjob-port"  # kubeflowv1.PyTorchJobDefaultPortName; Volcano's pytorch plugin uses it too
# The name each pod gives its claim on the ComputeDomain's channel (--mnnvl): a DNS label,
# as the NVIDIA DRA driver's own examples name it (demo/specs/imex/, v25.12.0).
MNNVL_CLAIM = "compute-domain-channel"


# The container's command: torchpod on the image's PATH, never the image's ENTRYPOINT.
LAUNCHER = ["torchpod"]


def launcher_args(spec: JobSpec, *, rdzv_from_operator: bool = False) -> list[str]:
    """The container's args for the image's `torchpod` entrypoint."""
    args = ["run"]
    if spec.rdzv == "etcd" and not rdzv_from_operator:
        args += ["--rdzv-backend", "etcd-v2", "--rdzv-endpoint", spec.etcd_endpoint]
    options, words = spec.launch()
    return args + [*options, "--", *words]


def user_env(spec: JobSpec) -> list[Obj]:
    """The preset's name and the job's --env pairs, as a container's env entries."""
    env: list[Obj] = [{"name": ENV_PRESET.name, "value": spec.preset}] if spec.preset else []
    return env + [dict(zip(("name", "value"), item.split("=", 1))) for item in spec.env]


def _downward(name: str, path: str) -> Obj:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def container(spec: JobSpec, *, name: str = CONTAINER, args: list[str] | None = None,
              downward: tuple[tuple[str, str], ...] = (), port_name: str | None = PORT_NAME) -> Obj:
    env = user_env(spec)
    env += [_downward(n, p) for n, p in downward]
    node = spec.per_node  # CPUs and memory always: a pod that requests nothing runs BestEffort
    resources: dict[str, str] = {"cpu": str(node.cpus), "memory": resources_mod.kube_quantity(node.memory_mi)}
    if spec.gpus_per_node:
        resources["nvidia.com/gpu"] = str(spec.gpus_per_node)
    if spec.rdma == "device-plugin":
        resources[spec.rdma_resource] = "1"
    c: Obj = {"name": name, "image": spec.image, "imagePullPolicy": "IfNotPresent", "command": list(LAUNCHER),
              "args": args if args is not None else launcher_args(spec)}
    if env:
        c["env"] = env
    if port_name and spec.rdzv == "c10d":
        c["ports"] = [{"name": port_name, "containerPort": spec.port, "protocol": "TCP"}]
    # requests = limits: the Guaranteed QoS class, the last a node evicts, with whole CPUs
    # that a kubelet's static CPU manager pins to the container
    c["resources"] = {"requests": dict(resources), "limits": dict(resources)}
    if spec.mnnvl:  # the pod's IMEX channel, by the name pod_spec gives the claim
        c.setdefault("resources", {})["claims"] = [{"name": MNNVL_CLAIM}]
    c["securityContext"] = container_security(spec)
    mounts: list[dict[str, Any]] = [{"name": "shm", "mountPath": "/dev/shm"}, {"name": "tmp", "mountPath": "/tmp"}]
    if spec.rdma == "hostnetwork":
        mounts.append({"name": "devinf", "mountPath": "/dev/infiniband"})
    for i, (_, inside) in enumerate(spec.fabric_binds()):
        mounts.append({"name": f"site-{i}", "mountPath": inside, "readOnly": True})
    for i, v in enumerate(spec.volumes):  # --volume
        mounts.append({"name": f"volume-{i}", "mountPath": v.path, **({"readOnly": True} if v.read_only else {})})
    c["volumeMounts"] = mounts
    if spec.workdir:
        c["workingDir"] = spec.workdir
    return c


def container_security(spec: JobSpec) -> Obj:
    """Least privilege for the job's container. Always a read-only root (the launcher finds a
    writable HOME and TMPDIR under the /tmp emptyDir: torchpod.home) and no privilege
    escalation (but with --privileged, which the API refuses alongside it). A pod that needs
    no capability runs as non-root with every capability dropped (restricted); RDMA adds
    IPC_LOCK to root's default set, which baseline does not allow."""
    security: Obj = {}
    if spec.privileged:
        security["privileged"] = True
    else:
        security["allowPrivilegeEscalation"] = False
    if spec.rdma != "none":
        security["capabilities"] = {"add": ["IPC_LOCK"]}  # pinning memory for RDMA, nothing else
    elif not spec.privileged:
        security["capabilities"] = {"drop": ["ALL"]}
        security["runAsNonRoot"] = True
    security["readOnlyRootFilesystem"] = True
    return security


def pod_security_context(spec: JobSpec) -> Obj:
    """The pod's: the runtime's default seccomp profile always; the non-root user, group and
    fsGroup (--run-as-user, --run-as-group, --fs-group) where the pod needs no capability."""
    sc: Obj = {}
    if spec.kube and spec.rdma == "none" and not spec.privileged:
        sc.update(runAsNonRoot=True, runAsUser=spec.run_as_user, runAsGroup=spec.run_as_group,
                  fsGroup=spec.fs_group)
    sc["seccompProfile"] = {"type": "RuntimeDefault"}
    return sc


def volumes(spec: JobSpec) -> list[Obj]:
    out: list[Obj] = [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": spec.shm_size}},
                      {"name": "tmp", "emptyDir": {}}]  # the only writable place under a read-only root
    if spec.rdma == "hostnetwork":
        out.append({"name": "devinf", "hostPath": {"path": "/dev/infiniband", "type": "Directory"}})
    for i, (host, _) in enumerate(spec.fabric_binds()):  # the node's aws-ofi-nccl and libfabric
        out.append({"name": f"site-{i}", "hostPath": {"path": host, "type": "Directory"}})
    for i, v in enumerate(spec.volumes):
        out.append({"name": f"volume-{i}", **_volume_source(v)})
    return out


def _volume_source(v) -> Obj:
    """A --volume's source: the claim (read-only when the mount is), the host directory
    (which must exist), or the ConfigMap (its keys as files)."""
    if v.kind == "pvc":
        return {"persistentVolumeClaim": {"claimName": v.source, **({"readOnly": True} if v.read_only else {})}}
    if v.kind == "hostpath":
        return {"hostPath": {"path": v.source, "type": "Directory"}}
    return {"configMap": {"name": v.source}}


def site_pod_fields(spec: JobSpec) -> Obj:
    """--service-account, --priority-class, --image-pull-secret, --node-selector and
    --toleration as pod fields."""
    out: Obj = {}
    if spec.service_account:
        out["serviceAccountName"] = spec.service_account
    if spec.priority_class:
        out["priorityClassName"] = spec.priority_class
    if spec.image_pull_secret:
        out["imagePullSecrets"] = [{"name": spec.image_pull_secret}]
    if spec.node_selector:
        out["nodeSelector"] = dict(item.split("=", 1) for item in spec.node_selector)
    if spec.toleration:
        out["tolerations"] = [t.as_object() for t in spec.tolerations]
    return out


def pod_spec(spec: JobSpec, **container_kw) -> Obj:
    pod: Obj = {}
    if spec.rdma == "hostnetwork":
        pod["hostNetwork"] = True
        pod["dnsPolicy"] = "ClusterFirstWithHostNet"  # keep cluster DNS: peers are found by service names
    pod["terminationGracePeriodSeconds"] = 30  # torchpod forwards SIGTERM to the workers
    pod.update(site_pod_fields(spec))
    pod["securityContext"] = pod_security_context(spec)
    pod["containers"] = [container(spec, **container_kw)]
    pod["volumes"] = volumes(spec)
    if spec.mnnvl:
        pod["resourceClaims"] = [{"name": MNNVL_CLAIM, "resourceClaimTemplateName": spec.compute_domain_channel}]
    return pod
