"""What a job's pods carry, each in its grammar: the Pod Security level, the user and groups
they run as, volumes, node selectors, tolerations and working directory, RDMA (host network
or a device plugin's resource) and each node's memory. Pure; each step raises one
InputError naming the flag.
"""

from __future__ import annotations

from dataclasses import replace

from torchpod.errors import InputError

from .. import grammars
from . import jobs, podfields, resources
from .jobspec import NON_ROOT_ID, JobSpec, flag, non_root

POD_SECURITY = ("restricted", "baseline", "privileged")
RDMA = ("none", "hostnetwork", "device-plugin")
GPU_RESOURCE = "nvidia.com/gpu"



def check_pod_security(spec: JobSpec) -> JobSpec:
    """--pod-security one of the Pod Security levels, or '' (podsecurity picks the strictest)."""
    if spec.pod_security and spec.pod_security not in POD_SECURITY:
        raise InputError(f"--pod-security={spec.pod_security!r} is unknown; expected one of {', '.join(POD_SECURITY)}")
    return spec


def check_pod_fields(spec: JobSpec) -> JobSpec:
    """--volume, --workdir, --node-selector and --toleration in their grammars; an HPC job
    binds host paths alone (no PVC or ConfigMap outside Kubernetes). The repeated options as tuples."""
    spec = replace(spec, volume=tuple(spec.volume), node_selector=tuple(spec.node_selector),
                   toleration=tuple(spec.toleration))
    volumes = spec.volumes
    podfields.parse_selectors(spec.node_selector)
    _ = spec.tolerations
    if spec.workdir:
        podfields.check_workdir(spec.workdir)
    other = next((v for v in volumes if v.kind != "hostpath"), None)
    if not spec.kube and other is not None:
        raise InputError(f"--volume {other.kind}:{other.source}:{other.path} with --scheduler {spec.scheduler}: "
                         "a PVC or ConfigMap is a Kubernetes object; expected hostpath:/HOST/PATH:/MOUNT here")
    return spec


def check_resource(value) -> None:
    """A Kubernetes extended resource: a DNS-1123 subdomain prefix (at most 253), '/', a
    qualified name (at most 63)."""
    prefix, slash, name = value.partition("/") if isinstance(value, str) else ("", "", "")
    if (not slash or not grammars.DNS1123_SUBDOMAIN.fullmatch(prefix) or len(prefix) > 253
            or not grammars.QUALIFIED_NAME.fullmatch(name) or len(name) > 63):
        raise InputError(f"--rdma device-plugin needs --rdma-resource; got {value!r}, expected "
                         "the device plugin's resource name, e.g. rdma/rdma_shared_device_a")
    if value == GPU_RESOURCE:
        raise InputError(f"--rdma-resource={value!r} is the GPU resource, which --gpus-per-node already "
                         "requests; expected the RDMA device plugin's resource, e.g. rdma/rdma_shared_device_a")


def check_ids(spec: JobSpec) -> JobSpec:
    """--run-as-user/--run-as-group/--fs-group only where the pods run as non-root."""
    given = next((n for n in ("run_as_user", "run_as_group", "fs_group") if getattr(spec, n) != NON_ROOT_ID), None)
    if given is None or non_root(spec):
        return spec
    why = ("an HPC job runs as the user who submits it" if not spec.kube else "--privileged runs as root"
           if spec.privileged else f"--rdma {spec.rdma} needs IPC_LOCK, which Kubernetes grants to root alone "
           "(no ambient capabilities)")
    raise InputError(f"{flag(given)}={getattr(spec, given)} applies to pods that need no capability; {why}: "
                     "expected it left out")


def check_rdma(spec: JobSpec) -> JobSpec:
    """--rdma known, for Kubernetes pods of a kind that allows it; --rdma-resource exactly with
    --rdma device-plugin, and a device plugin's resource (check_resource)."""
    if spec.rdma not in RDMA:
        raise InputError(f"--rdma={spec.rdma!r} is unknown; expected one of {', '.join(RDMA)}")
    if spec.rdma == "device-plugin":
        check_resource(spec.rdma_resource)
    if spec.rdma_resource and spec.rdma != "device-plugin":
        raise InputError(f"--rdma-resource={spec.rdma_resource!r} is only used with --rdma device-plugin; "
                         f"got --rdma {spec.rdma}")
    if spec.rdma != "none" and not spec.kube:
        raise InputError(f"--rdma={spec.rdma} is for Kubernetes pods; a {spec.scheduler} job runs on the "
                         "node's own network and devices: leave --rdma out")
    if spec.rdma == "hostnetwork" and jobs.kind(spec.scheduler).no_hostnetwork:
        raise InputError(f"--rdma hostnetwork with --scheduler {spec.scheduler}: "
                         f"{jobs.kind(spec.scheduler).no_hostnetwork}")
    return spec


def _size_mi(size: str) -> int:
    """MiB of a size the job itself wrote (JobSpec.shm_size: the preset's or NGi)."""
    return resources.parse_memory("/dev/shm", size)


def check_memory(spec: JobSpec) -> JobSpec:
    """--memory-per-node in its grammar, and on Kubernetes above the memory-backed /dev/shm,
    which counts against the container's memory limit (emptyDir medium Memory)."""
    node = spec.per_node
    if spec.kube and node.memory_given and node.memory_mi <= _size_mi(spec.shm_size):
        usual = resources.kube_quantity(replace(spec, memory_per_node="").per_node.memory_mi)
        raise InputError(f"--memory-per-node={spec.memory_per_node} with a {spec.shm_size} /dev/shm: a pod's "
                         "memory-backed /dev/shm counts against its memory limit; expected more than "
                         f"{spec.shm_size}, e.g. {usual} (the default)")
    return spec
