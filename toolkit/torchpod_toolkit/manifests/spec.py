"""What a user asks `invoke manifests` for, checked once. Pure.

``JobSpec`` holds the request; ``check(spec)`` returns it normalised or raises one
InputError naming the flag, the value and the fix. Nothing is rendered or written before
``check`` passes, so bad input never leaves a half-written directory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from torchpod.errors import InputError
from torchpod.fabric import presets as presets_mod
from torchpod.fabric.site import SITE_DEPS, SITE_LIB
from torchpod.schedulers.common import DEFAULT_RDZV_PORT
from torchpod.values import Endpoint

# Kubernetes schedulers render YAML; HPC schedulers render a batch script. The names are
# the containers-as-nodes harness's scenario names (cluster/topology.py), so a rendered
# job and the harness's job of the same name are one thing.
KUBE = ("volcano", "volcano-master", "kubeflow", "kubeflow-elastic", "trainer", "runai")
HPC = ("slurm", "pbs", "pbs-pals")
SCHEDULERS = KUBE + HPC
RDMA = ("none", "hostnetwork", "device-plugin")
RDZV = ("c10d", "etcd")
RUNTIMES = ("apptainer", "enroot", "podman", "docker", "none")

# The c10d port of each job: training-operator's PyTorchJobDefaultPort and the Volcano
# pytorch plugin's DefaultPort are both 23456; Trainer v2 fixes 29500 (kubeflow/trainer
# pkg/constants ContainerTrainerPort); a worker-only Volcano job names none, so the port
# is the one torchpod picks for endpoints it builds from host lists.
C10D_PORT = 23456
TRAINER_PORT = 29500
ETCD_PORT = 2379

_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_RESOURCE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


@dataclass(frozen=True)
class JobSpec:
    scheduler: str
    nodes: int
    image: str
    command: tuple[str, ...]  # the training script and its arguments
    name: str = "train"
    gpus_per_node: int = 8  # 0: a CPU job (no GPU resources, one process per node)
    rdma: str = "none"
    rdma_resource: str = ""  # device-plugin resource, e.g. rdma/rdma_shared_device_a
    privileged: bool = False
    preset: str = ""
    rdzv: str = "c10d"
    etcd_endpoint: str = ""  # HOST:PORT of an existing etcd with the v2 API
    etcd_server: bool = False  # render an etcd Pod and Services next to the job
    runtime: str = ""  # HPC container runtime; "" means apptainer for HPC schedulers
    namespace: str = "default"
    queue: str = ""  # Volcano queue, Slurm partition or PBS queue; "" leaves the default
    walltime: str = "01:00:00"
    project: str = "team-a"  # Run:ai project
    site_lib: str = ""  # Slingshot: the host directory with the site's aws-ofi-nccl plugin

    @property
    def fabric(self) -> str:
        """The preset's fabric ('' without a preset): what the job must bind in for NCCL."""
        return presets_mod.load()[self.preset].fabric if self.preset else ""

    def fabric_binds(self) -> tuple[tuple[str, str], ...]:
        """(host path, container path) a container runtime binds for the fabric's net plugin
        and libfabric, where the launcher looks for them (torchpod.fabric.site)."""
        if self.fabric == "efa":  # the EFA installer: libfabric in efa/, aws-ofi-nccl in ofi-nccl/
            return (("/opt/amazon", "/opt/amazon"),)
        if self.fabric == "slingshot":  # HPE's libfabric and libcxi, the site's plugin build
            return ((self.site_lib, SITE_LIB), ("/opt/cray/libfabric", "/opt/cray/libfabric"),
                    ("/usr/lib64/libcxi.so.1", f"{SITE_DEPS}/libcxi.so.1"))
        return ()

    @property
    def kube(self) -> bool:
        return self.scheduler in KUBE

    @property
    def port(self) -> int:
        if self.scheduler == "volcano":
            return DEFAULT_RDZV_PORT
        return TRAINER_PORT if self.scheduler == "trainer" else C10D_PORT

    @property
    def etcd_service(self) -> str:
        return f"{self.name}-etcd"

    @property
    def nproc(self) -> int:
        return max(1, self.gpus_per_node)

    @property
    def shm_size(self) -> str:
        """Memory-backed /dev/shm: the preset's, else 8Gi per GPU (DataLoader workers pass
        batches through it; NCCL's intra-node transport needs far less), at least 2Gi."""
        if self.preset and presets_mod.load()[self.preset].shm:
            return presets_mod.load()[self.preset].shm
        return f"{max(2, 8 * self.gpus_per_node)}Gi"


def image_problem(image: str) -> str | None:
    """Why ``image`` is not pinned (no tag or digest, or ``latest``), else None."""
    if _DIGEST.search(image):
        return None
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return "has no tag; expected REGISTRY/torchpod/pytorch:TAG or @sha256:DIGEST"
    if last.rsplit(":", 1)[1] in ("", "latest"):
        return "uses the 'latest' tag, which moves; pin a version tag or @sha256:DIGEST"
    return None


def check(spec: JobSpec) -> JobSpec:
    """The spec, normalised; else one InputError naming the flag and the fix."""
    if spec.scheduler not in SCHEDULERS:
        raise InputError(f"--scheduler={spec.scheduler!r} is unknown; expected one of {', '.join(SCHEDULERS)}")
    if spec.nodes < 1:
        raise InputError(f"--nodes={spec.nodes}; expected 1 or more")
    if spec.scheduler == "volcano-master" and spec.nodes < 2:
        raise InputError(f"--nodes={spec.nodes} with --scheduler volcano-master; expected 2 or more "
                         "(one master task and at least one worker), or --scheduler volcano")
    if spec.gpus_per_node < 0:
        raise InputError(f"--gpus-per-node={spec.gpus_per_node}; expected 0 (a CPU job) or more")
    if not _DNS_LABEL.match(spec.name) or len(spec.name) > 40:
        raise InputError(f"--name={spec.name!r}; expected a DNS label of at most 40 characters "
                         "(lower-case letters, digits, '-'; starting with a letter)")
    if not _DNS_LABEL.match(spec.namespace):
        raise InputError(f"--namespace={spec.namespace!r}; expected a DNS label")
    problem = image_problem(spec.image)
    if problem:
        raise InputError(f"--image={spec.image!r} {problem}")
    if not spec.command:
        raise InputError("no training script given; expected `-- train.py [ARGS...]` after the options")
    if spec.rdma not in RDMA:
        raise InputError(f"--rdma={spec.rdma!r} is unknown; expected one of {', '.join(RDMA)}")
    if spec.rdma == "device-plugin" and not _RESOURCE.match(spec.rdma_resource):
        raise InputError(f"--rdma device-plugin needs --rdma-resource; got {spec.rdma_resource!r}, expected "
                         "the device plugin's resource name, e.g. rdma/rdma_shared_device_a")
    if spec.rdma_resource and spec.rdma != "device-plugin":
        raise InputError(f"--rdma-resource={spec.rdma_resource!r} is only used with --rdma device-plugin; "
                         f"got --rdma {spec.rdma}")
    if spec.rdma != "none" and not spec.kube:
        raise InputError(f"--rdma={spec.rdma} is for Kubernetes pods; a {spec.scheduler} job runs on the "
                         "node's own network and devices: leave --rdma out")
    if spec.scheduler == "trainer" and spec.rdma == "hostnetwork":
        raise InputError("--rdma hostnetwork with --scheduler trainer: a TrainJob's runtimePatches cannot "
                         "set hostNetwork (trainer v2.3 CRD); use --rdma device-plugin, or another scheduler")
    if spec.preset:
        known = presets_mod.load()
        if spec.preset not in known:
            raise InputError(f"--preset={spec.preset!r} is unknown; expected one of {', '.join(sorted(known))}")
        shape = known[spec.preset]
        if spec.gpus_per_node > shape.gpus_per_node:
            raise InputError(f"--gpus-per-node={spec.gpus_per_node} but preset {spec.preset} is a shape with "
                             f"{shape.gpus_per_node} GPUs; expected {shape.gpus_per_node} or fewer")
    if spec.rdzv not in RDZV:
        raise InputError(f"--rdzv={spec.rdzv!r} is unknown; expected one of {', '.join(RDZV)}")
    if spec.rdzv == "etcd":
        if spec.etcd_server and not spec.kube:
            raise InputError("--etcd-server renders a Kubernetes Pod; for an HPC job give --etcd-endpoint HOST:PORT")
        if not spec.etcd_endpoint and not spec.etcd_server:
            raise InputError("--rdzv etcd needs an etcd endpoint; expected --etcd-endpoint HOST:PORT (an etcd "
                             "serving the v2 API) or --etcd-server (render one next to the job)")
        if spec.etcd_endpoint:
            ep = Endpoint.parse("--etcd-endpoint", spec.etcd_endpoint)
            if ep.port is None:
                raise InputError(f"--etcd-endpoint={spec.etcd_endpoint!r} has no port; expected HOST:PORT, e.g. etcd:2379")
        else:
            spec = replace(spec, etcd_endpoint=f"{spec.etcd_service}:{ETCD_PORT}")
    elif spec.etcd_endpoint or spec.etcd_server:
        raise InputError("--etcd-endpoint/--etcd-server are for --rdzv etcd; got --rdzv c10d")
    runtime = spec.runtime or ("apptainer" if not spec.kube else "none")
    if runtime not in RUNTIMES:
        raise InputError(f"--runtime={spec.runtime!r} is unknown; expected one of {', '.join(RUNTIMES)}")
    if spec.kube and runtime != "none":
        raise InputError(f"--runtime={runtime} is for HPC job scripts; Kubernetes runs the image itself: leave it out")
    if spec.site_lib and not spec.site_lib.startswith("/"):
        raise InputError(f"--site-lib={spec.site_lib!r}; expected an absolute host path")
    if spec.site_lib and spec.fabric != "slingshot":
        raise InputError(f"--site-lib is for Slingshot presets; preset {spec.preset or '(none)'} needs no site plugin "
                         "directory (EFA binds the EFA installer's /opt/amazon)")
    if spec.fabric == "slingshot" and runtime != "none" and not spec.site_lib:
        raise InputError(f"--preset {spec.preset} (Slingshot) with --runtime {runtime} needs --site-lib HOSTDIR: the "
                         "host directory with the site's aws-ofi-nccl build (libnccl-net.so), bound at " + SITE_LIB)
    if spec.fabric == "slingshot" and spec.kube:
        raise InputError(f"--preset {spec.preset} is a Slingshot HPC shape; expected --scheduler slurm, pbs or pbs-pals")
    if not re.fullmatch(r"\d+:\d\d:\d\d", spec.walltime):
        raise InputError(f"--walltime={spec.walltime!r}; expected HH:MM:SS")
    if spec.queue and not re.fullmatch(r"[A-Za-z0-9_.-]+", spec.queue):
        raise InputError(f"--queue={spec.queue!r}; expected a queue or partition name (letters, digits, '_', '.', '-')")
    return replace(spec, runtime=runtime)
