"""What a user asks `invoke manifests` for: the ``JobSpec`` record and the option each of
its fields declares. Pure.

A field declared with :func:`option` is also a flag of `invoke manifests`: its help, its
task default, the kinds that can carry it (:class:`Option`). ``manifests.options`` reads
those declarations into the option table; ``manifests.spec.check`` checks a JobSpec before
anything is rendered.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field
from typing import Callable

from torchpod.contract import PREFLIGHT_MODULE
from torchpod.fabric import by_name as fabric_record
from torchpod.fabric import presets as presets_mod

from . import jobs, podfields, resources

# Kubernetes schedulers render YAML; HPC schedulers render a batch script: jobs.KINDS.
KUBE, HPC = jobs.KUBE, jobs.HPC
SCHEDULERS = jobs.NAMES
# etcd 3.5 is the last line with the v2 API torch's etcd-v2 rendezvous needs (--enable-v2;
# 3.6 removed it). A tag, since no digest of it can be checked from where torchpod is built:
# the header asks for --etcd-image REPO@sha256:DIGEST while the tag is in use.
ETCD_IMAGE = "quay.io/coreos/etcd:v3.5.21"
# Which kinds take which option: each kind's record says what its job file can say
# (manifests/kinds/; jobs.having lists them in KINDS order). A Kubernetes job and a SkyPilot
# task have no queue and no wall time; a Run:ai CLI line and a TrainJob's runtimePatches fewer
# pod fields than the pod templates written in full (kinds/runai.py, kinds/trainer.py).
QUEUE_KINDS = jobs.having("queue")
BATCH_KINDS = jobs.having("batch")
POD_KINDS = jobs.having("pod_fields")
PRIORITY_KINDS = jobs.having("priority_class")
WORKDIR_KINDS = jobs.having("workdir")
# Volumes: the pods' (a PVC, a host path, a ConfigMap), or a host path bound into an HPC job's
# container (manifests.pods refuses the others there, and a job with no container to bind into).
VOLUME_KINDS = (*POD_KINDS, *BATCH_KINDS)
QOS_KINDS = jobs.having("qos")
REQUEUE_KINDS = jobs.having("requeue")
PROJECT_KINDS = jobs.having("project")
RUNTIMES = jobs.RUNTIMES  # one record per container runtime: runtimes.RUNTIMES


# Bounds on the counts: far above any cluster torchpod targets, low enough that a typo
# (1e11 nodes, 800 GPUs) is caught here rather than by the scheduler hours later.
MAX_NODES = 100_000
MAX_GPUS_PER_NODE = 64
# --requeue-lead: sbatch's --signal takes a sig_time of 0 to 65535 seconds, and "due to the
# resolution of event handling by Slurm, the signal may be sent up to 60 seconds earlier than
# specified" (sbatch(1), Slurm 22.05, SchedMD/slurm doc/man/man1/sbatch.1).
MAX_REQUEUE_LEAD = 65535

# The kinds whose job can run on fewer nodes than it asks for (`--nodes MIN:MAX`, torchrun's
# --nnodes form): their records say what carries MIN there, and kube.py renders it. Every
# other kind has a fixed size. Listed alphabetically, as the help always has.
NODE_RANGE_KINDS = tuple(sorted(jobs.having("node_range")))

# --mnnvl (GB200 NVL72): the kinds whose every rendered pod template can carry a DRA claim,
# spec.resourceClaims and the container's resources.claims, in the CRD each is validated
# against (tests/reference/crds), with the first operator release whose CRD has the claim's
# current form ({name, resourceClaimTemplateName}, Kubernetes 1.31 on; older CRDs nest it
# under `source` and an API server would prune it): each kind's record (JobKind.mnnvl), which
# cites the release.
MNNVL_OPERATORS = {k.name: k.mnnvl for k in jobs.KINDS if k.mnnvl}
MNNVL_KINDS = tuple(MNNVL_OPERATORS)


@dataclass(frozen=True)
class Option:
    """How one JobSpec field is asked for on `invoke manifests`' command line. Declared with
    the field (``option``), it makes the task's flag and help, the Regenerate line
    (regenerate.invoke_line) and its parser (regenerate.parse_invoke_line): the flag is the field's
    name with '-' for '_', as invoke spells it."""

    help: str
    cli_default: str | None = None  # the task's default where it differs from the field's
    count: tuple[int, int] | None = None  # a whole number in [min, max], typed as text
    always: bool = False  # the Regenerate line names it even at its default
    only: Callable[["JobSpec"], bool] | None = None  # the Regenerate line names it only for these jobs
    # with count: the flag may also be typed MIN:MAX; MIN goes to this field (see parse_counts)
    span: str | None = None
    # the kinds whose job can express it (None: every kind); any other kind refuses a value
    # other than the default in one line, never drops it (options.check_taken)
    kinds: tuple[str, ...] | None = None
    repeat: bool = False  # the flag may be given again for another value (a tuple field)


def option(default=MISSING, **how):
    """A JobSpec field that is also an `invoke manifests` option (see Option)."""
    return field(default=default, metadata={"option": Option(**how)})


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")



# A pod that needs no capability runs as this user and group by default: no entry in the
# image's /etc/passwd is needed (the launcher gives any user a writable HOME: torchpod.home).
NON_ROOT_ID = 1000
MAX_ID = 2**31 - 1  # Kubernetes' runAsUser/runAsGroup/fsGroup are int64, Linux IDs 32-bit; kept signed


def non_root(spec: "JobSpec") -> bool:
    """Whether the job's pods run as a non-root user: a Kubernetes job whose pods need no
    capability (IPC_LOCK for RDMA takes effect for root alone: Kubernetes grants no ambient
    capabilities) and are not privileged."""
    return spec.kube and spec.rdma == "none" and not spec.privileged


@dataclass(frozen=True)
class JobSpec:
    # Field order is the order of the Regenerate line's flags; the first four are positional.
    scheduler: str = option(help=jobs.choices(), cli_default="", always=True)
    # the most nodes (pods); with --nodes MIN:MAX, MIN is min_nodes (the last field)
    nodes: int = option(help=f"nodes (pods) in the job, 1 to {MAX_NODES}; MIN:MAX for an elastic job "
                             f"({jobs.choices(NODE_RANGE_KINDS)})", cli_default="2",
                        count=(1, MAX_NODES), always=True, span="min_nodes")
    image: str = option(help="the image, pinned: REGISTRY/torchpod/pytorch:TAG or @sha256:DIGEST",
                        cli_default="", always=True)
    # mypy's dataclass plugin reads option(...) as a default (it follows only dataclasses.field)
    command: tuple[str, ...] = field()  # type: ignore[misc]  # the training script and its arguments (after `--`)
    # 0: a CPU job (no GPU resources, one process per node)
    gpus_per_node: int = option(8, help=f"GPUs per node, 0 (a CPU job) to {MAX_GPUS_PER_NODE}",
                                count=(0, MAX_GPUS_PER_NODE), always=True)
    name: str = option("train", help="job name (a DNS label)", always=True)
    namespace: str = option("default", help="Kubernetes namespace", kinds=KUBE)
    rdma: str = option("none", help="none, hostnetwork (OKE style) or device-plugin")
    rdma_resource: str = option("", help="the RDMA device plugin's resource, e.g. rdma/rdma_shared_device_a")
    privileged: bool = option(False, help="privileged containers (the file's header says what that opens)",
                              kinds=KUBE)
    preset: str = option("", help="a shape preset (torchpod/fabric/presets.json): the launcher applies its "
                                  "NCCL settings")
    rdzv: str = option("c10d", help="the rendezvous: c10d or etcd")
    # HOST:PORT of an existing etcd with the v2 API; spec.check fills in the etcd Pod's for --etcd-server
    etcd_endpoint: str = option("", help="HOST:PORT of an etcd serving the v2 API (with --rdzv etcd)",
                                only=lambda s: not s.etcd_server)
    etcd_server: bool = option(False, help="render an etcd Pod and Service next to the job (with --rdzv etcd)")
    etcd_image: str = option(ETCD_IMAGE, help="the etcd Pod's image (with --etcd-server); pin it by digest, "
                                              "REPO@sha256:DIGEST, or name a mirror", only=lambda s: s.etcd_server)
    # "" means apptainer for HPC schedulers, none for Kubernetes (spec.check)
    runtime: str = option("", help="HPC container runtime: " + jobs.choices(tuple(
                              n + " (default)" if n == jobs.DEFAULT_RUNTIME else n for n in jobs.RUNTIMES)),
                          always=True, only=lambda s: not s.kube)
    queue: str = option("", help="Volcano queue, Slurm partition, PBS or LSF queue (Slurm, LSF: several as A,B)",
                        kinds=QUEUE_KINDS)
    gpu_model: str = option("", help="the GPU model the batch system picks GPUs by: Slurm's GRES type "
                                     "(--gpus-per-node=MODEL:N), LSF's gmodel, SkyPilot's accelerator (default H100)",
                            kinds=jobs.having("gpu_model"))
    walltime: str = option("01:00:00", help="HPC wall time, HH:MM:SS", kinds=BATCH_KINDS)
    # 0: off. Else sbatch --signal=B:USR1@SECONDS and --requeue (hpc.slurm_script)
    requeue_lead: int = option(0, help="Slurm: SECONDS before --walltime at which the job gets USR1, saves a "
                                       "snapshot and requeues itself; 0 (the default) is off",
                               count=(0, MAX_REQUEUE_LEAD), only=lambda s: s.scheduler in REQUEUE_KINDS)
    project: str = option("team-a", help="Run:ai project", kinds=PROJECT_KINDS)
    site_lib: str = option("", help="Slingshot presets: the host directory with the site's aws-ofi-nccl "
                                    "build (libnccl-net.so)")
    # GB200 NVL72: a ComputeDomain and one IMEX channel claim per pod (kube.compute_domain)
    mnnvl: bool = option(False, help="GB200 multi-node NVLink: a ComputeDomain (NVIDIA's DRA driver) and its "
                                     "IMEX channel claimed by every pod (" + jobs.choices(MNNVL_KINDS) + ")")
    # Pod Security (torchpod_toolkit.manifests.podsecurity judges the rendered pods)
    pod_security: str = option("", help="the Pod Security level every pod must meet: restricted, baseline or "
                                        "privileged; by default the most restrictive the job allows (said in "
                                        "the header)", kinds=KUBE)
    run_as_user: int = option(NON_ROOT_ID, help="UID of pods that need no capability (--rdma none): the image "
                                                 "runs as any user", count=(0, MAX_ID), only=non_root)
    run_as_group: int = option(NON_ROOT_ID, help="GID of those pods", count=(0, MAX_ID), only=non_root)
    fs_group: int = option(NON_ROOT_ID, help="fsGroup of those pods: the group their volumes belong to",
                           count=(0, MAX_ID), only=non_root)
    workload: str = option("train", help="train: run the command after `--`; preflight: run torchpod.preflight "
                                         "alone (its options after `--`) to prove the fabric and name a slow node")
    # 0 and '': the defaults (resources.per_node): the whole node where the job holds it alone
    cpus_per_node: int = option(0, help=f"CPUs for each node's launcher and workers, 1 to "
                                        f"{resources.MAX_CPUS_PER_NODE}; default: the whole node on Slurm "
                                        f"(--exclusive) and LSF (-x), else {resources.CPUS_PER_GPU} per GPU "
                                        f"({resources.CPU_JOB_CPUS} for a CPU job)",
                                count=(0, resources.MAX_CPUS_PER_NODE))
    memory_per_node: str = option("", help="memory for each node, e.g. 256Gi (Mi, Gi or Ti); default: the whole "
                                           "node's where the job holds it alone, else "
                                           f"{resources.MEMORY_PER_GPU_MI // 1024}Gi per GPU "
                                           f"({resources.CPU_JOB_MEMORY_MI // 1024}Gi for a CPU job)")
    # what a site asks of every job: who pays, which service level, which nodes
    account: str = option("", help="the account the job is charged to: Slurm --account, PBS -A, LSF -P",
                          kinds=BATCH_KINDS)
    qos: str = option("", help="Slurm quality of service (--qos)", kinds=QOS_KINDS)
    constraint: str = option("", help="Slurm node features, e.g. h100&ib (--constraint)", kinds=QOS_KINDS)
    reservation: str = option("", help="Slurm reservation (--reservation)", kinds=QOS_KINDS)
    exclude: str = option("", help="Slurm nodes the job must not run on, a host list, e.g. node[01-04] (--exclude)",
                          kinds=QOS_KINDS)
    switches: str = option("", help="Slurm: COUNT[@MAX-TIME], the most leaf switches the job may span and how long "
                                    "it may wait for that, e.g. 1@00:30:00 (--switches, with the topology/tree plugin)",
                           kinds=QOS_KINDS)
    directive: tuple[str, ...] = option((), help="a directive of the batch system's own that torchpod does not "
                                                 "write, as its option, e.g. --mail-type=END (Slurm), "
                                                 "'-l filesystems=home' (PBS), -B (LSF); repeat the flag for more",
                                        repeat=True, kinds=BATCH_KINDS)
    service_account: str = option("", help="the pods' Kubernetes service account", kinds=POD_KINDS)
    priority_class: str = option("", help="the pods' PriorityClass", kinds=PRIORITY_KINDS)
    image_pull_secret: str = option("", help="the Secret the kubelet pulls the image with", kinds=POD_KINDS)
    volume: tuple[str, ...] = option((), help="a volume mounted in every container: pvc:CLAIM:/MOUNT[:ro], "
                                              "hostpath:/HOST/PATH:/MOUNT[:ro] or configmap:NAME:/MOUNT (repeat "
                                              "the flag for more; HPC jobs bind host paths)",
                                     repeat=True, kinds=VOLUME_KINDS)
    workdir: str = option("", help="the container's working directory (default: the image's, /workspace)",
                          kinds=WORKDIR_KINDS)
    node_selector: tuple[str, ...] = option((), help="KEY=VALUE: run the pods only on nodes with that label "
                                                     "(repeat the flag for more)", repeat=True, kinds=POD_KINDS)
    toleration: tuple[str, ...] = option((), help="KEY[=VALUE]:EFFECT: the pods tolerate that taint, e.g. "
                                                  "nvidia.com/gpu:NoSchedule (repeat the flag for more)",
                                         repeat=True, kinds=POD_KINDS)
    # NAME=VALUE pairs set for torchpod and the workers on every node (check_env)
    env: tuple[str, ...] = option((), help="NAME=VALUE set on every node for torchpod and its workers "
                                           "(repeat the flag for more)", repeat=True)
    # No flag of its own: `--nodes MIN:MAX` sets it. None: the job runs on exactly ``nodes``.
    min_nodes: int | None = None
    # the options the user typed whose value is also their default (`--walltime 01:00:00`):
    # still given, so a kind with no place for one refuses it (options.check_taken) rather than
    # dropping it without a word; `invoke manifests` fills it (given_defaults)
    explicit: frozenset[str] = field(default=frozenset(), compare=False)

    @property
    def fabric(self) -> str:
        """The preset's fabric ('' without a preset): what the job must bind in for NCCL."""
        return presets_mod.load()[self.preset].fabric if self.preset else ""

    def fabric_binds(self) -> tuple[tuple[str, str], ...]:
        """(host path, container path) a container runtime binds for the fabric's net plugin
        and libfabric, where the launcher looks for them: the fabric's record
        (torchpod.fabric FABRICS); its site-plugin entry is this job's --site-lib."""
        record = fabric_record(self.fabric) if self.fabric else None
        if record is None:
            return ()
        return tuple((self.site_lib if host is None else host, inside) for host, inside in record.binds)

    @property
    def kube(self) -> bool:
        return self.scheduler in KUBE

    @property
    def nnodes(self) -> str:
        """The node count as torchrun's --nnodes writes it: ``N``, or ``MIN:MAX`` when elastic."""
        return f"{self.min_nodes}:{self.nodes}" if self.min_nodes is not None else str(self.nodes)

    @property
    def port(self) -> int:
        """The job's c10d port (jobs.KINDS)."""
        return jobs.kind(self.scheduler).port

    @property
    def etcd_service(self) -> str:
        return f"{self.name}-etcd"

    @property
    def compute_domain(self) -> str:
        """The ComputeDomain's name (--mnnvl)."""
        return f"{self.name}-compute-domain"

    @property
    def compute_domain_channel(self) -> str:
        """The ResourceClaimTemplate the ComputeDomain makes, which every pod claims."""
        return f"{self.name}-compute-domain-channel"

    def launch(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(the workload's `torchpod run` options, the words after `--`): the training
        command, or the preflight module run as a module with its options."""
        if self.workload == "preflight":
            return ("--module",), (PREFLIGHT_MODULE, *self.command)
        return (), self.command

    @property
    def volumes(self) -> tuple[podfields.Volume, ...]:
        """The --volume records (podfields.parse_volumes)."""
        return podfields.parse_volumes(self.volume)

    @property
    def tolerations(self) -> tuple[podfields.Toleration, ...]:
        return tuple(podfields.parse_toleration(t) for t in self.toleration)

    @property
    def per_node(self) -> resources.PerNode:
        """The CPUs and memory each node asks for (resources.per_node)."""
        return resources.per_node(self.gpus_per_node, self.cpus_per_node, self.memory_per_node)

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
