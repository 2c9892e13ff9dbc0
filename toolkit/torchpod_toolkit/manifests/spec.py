"""What a user asks `invoke manifests` for, checked once. Pure.

``JobSpec`` holds the request; ``check(spec)`` returns it normalised or raises one
InputError naming the flag, the value and the fix. Nothing is rendered or written before
``check`` passes, so bad input never leaves a half-written directory.
"""

from __future__ import annotations

import re
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Callable

from torchpod import preflight
from torchpod.arch import normalise_arch
from torchpod.contract import ENV_COMMAND, ENV_PRESET, ETCD_PORT, GPU_VARS, PREFLIGHT_MODULE, SCHEDULER_VARS, SITE_LIB
from torchpod.errors import InputError
from torchpod.fabric import by_name as fabric_record
from torchpod.fabric import presets as presets_mod

from .. import grammars
from . import jobs, podfields, resources, sitegrammar

# Kubernetes schedulers render YAML; HPC schedulers render a batch script: jobs.KINDS.
KUBE, HPC = jobs.KUBE, jobs.HPC
SCHEDULERS = jobs.NAMES
RDMA = ("none", "hostnetwork", "device-plugin")
# What the job runs: the user's command, or torchpod.preflight alone (docs/launcher.md#preflight).
WORKLOADS = ("train", "preflight")
RDZV = ("c10d", "etcd")
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
# container (spec.check refuses the others there, and a job with no container to bind into).
VOLUME_KINDS = (*POD_KINDS, *BATCH_KINDS)
QOS_KINDS = jobs.having("qos")
REQUEUE_KINDS = jobs.having("requeue")
PROJECT_KINDS = jobs.having("project")
RUNTIMES = jobs.RUNTIMES  # one record per container runtime: hpc.RUNTIMES


# Bounds on the counts: far above any cluster torchpod targets, low enough that a typo
# (1e11 nodes, 800 GPUs) is caught here rather than by the scheduler hours later.
MAX_NODES = 100_000
MAX_GPUS_PER_NODE = 64
# --requeue-lead: sbatch's --signal takes a sig_time of 0 to 65535 seconds, and "due to the
# resolution of event handling by Slurm, the signal may be sent up to 60 seconds earlier than
# specified" (sbatch(1), Slurm 22.05, SchedMD/slurm doc/man/man1/sbatch.1).
MAX_REQUEUE_LEAD = 65535
SIGNAL_EARLY = 60

# The kinds whose job can run on fewer nodes than it asks for (`--nodes MIN:MAX`, torchrun's
# --nnodes form): their records say what carries MIN there, and kube.py renders it. Every
# other kind has a fixed size. Listed alphabetically, as the help always has.
NODE_RANGE_KINDS = tuple(sorted(jobs.having("node_range")))

# Every pattern below is matched with fullmatch over ASCII only: `$` would accept a trailing
# newline, and `\d`/`\w` accept non-ASCII digits and letters.
_A = re.ASCII
# Kubernetes names: a DNS-1123 label (k8s.io/apimachinery pkg/util/validation IsDNS1123Label,
# at most 63). The job name also names Services, so it must start with a letter (DNS-1035).
_DNS1123_LABEL = grammars.DNS1123_LABEL
_DNS1123_SUBDOMAIN = grammars.DNS1123_SUBDOMAIN
_QUALIFIED_NAME = grammars.QUALIFIED_NAME
# An image reference: distribution/reference's grammar, written once in torchpod_toolkit.grammars.
_WALLTIME = re.compile(r"([0-9]{1,5}):([0-5][0-9]):([0-5][0-9])", _A)
# Slurm's days form, D-HH:MM:SS (sbatch(1) --time "days-hours:minutes:seconds"), which the
# check turns into hours (HH:MM:SS) so that PBS's walltime and LSF's -W take it too
_WALLTIME_DAYS = re.compile(r"([0-9]{1,3})-([0-9]{1,2}):([0-5][0-9]):([0-5][0-9])", _A)
_HOSTNAME = grammars.QUALIFIED_NAME  # a host of letters, digits and inner '-', '_', '.'
_DIGITS = re.compile(r"[0-9]+", _A)
HOST_PATH_CHARS = grammars.BIND_PATH_CHARS
GPU_RESOURCE = "nvidia.com/gpu"

# --mnnvl (GB200 NVL72): the kinds whose every rendered pod template can carry a DRA claim,
# spec.resourceClaims and the container's resources.claims, in the CRD each is validated
# against (tests/reference/crds), with the first operator release whose CRD has the claim's
# current form ({name, resourceClaimTemplateName}, Kubernetes 1.31 on; older CRDs nest it
# under `source` and an API server would prune it): each kind's record (JobKind.mnnvl), which
# cites the release.
MNNVL_OPERATORS = {k.name: k.mnnvl for k in jobs.KINDS if k.mnnvl}
MNNVL_KINDS = tuple(MNNVL_OPERATORS)
# GB200's Grace CPU is Arm: its nodes run linux/arm64 images (NVIDIA GB200 NVL Multi-Node
# Tuning Guide, "The NVIDIA Grace Blackwell Superchip").
MNNVL_ARCH = "aarch64"
# A kind's record may name its last pod (JobKind.last_pod: a Trainer job's are
# <name>-node-0-<i>); JobSet's webhook refuses a JobSet whose longest pod name plus a
# 5-character suffix is no DNS-1035 label of at most 63 (kubernetes-sigs/jobset v0.12.0,
# pkg/webhooks/jobset_webhook.go, longestPodName), and Trainer's CEL rule holds the
# TrainJob's name to 63 (v2.3.0 trainjob_types.go).
POD_SUFFIX = len("-abcde")
DNS_LABEL_MAX = 63
# --name of a Kubernetes kind: well inside every kind's limits (pod_name_room of the Trainer's
# pods at MAX_NODES is 44); a batch system's own grammar is on its kind's record.
NAME_MAX = sitegrammar.DNS_NAME.limit


@dataclass(frozen=True)
class Option:
    """How one JobSpec field is asked for on `invoke manifests`' command line. Declared with
    the field (``option``), it makes the task's flag and help, the Regenerate line
    (render.invoke_line) and its parser (render.parse_invoke_line): the flag is the field's
    name with '-' for '_', as invoke spells it."""

    help: str
    cli_default: str | None = None  # the task's default where it differs from the field's
    count: tuple[int, int] | None = None  # a whole number in [min, max], typed as text
    always: bool = False  # the Regenerate line names it even at its default
    only: Callable[["JobSpec"], bool] | None = None  # the Regenerate line names it only for these jobs
    # with count: the flag may also be typed MIN:MAX; MIN goes to this field (see parse_counts)
    span: str | None = None
    # the kinds whose job can express it (None: every kind); any other kind refuses a value
    # other than the default in one line, never drops it (spec.check, _check_taken)
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
POD_SECURITY = ("restricted", "baseline", "privileged")


def _non_root(spec: "JobSpec") -> bool:
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
                                                 "runs as any user", count=(0, MAX_ID), only=_non_root)
    run_as_group: int = option(NON_ROOT_ID, help="GID of those pods", count=(0, MAX_ID), only=_non_root)
    fs_group: int = option(NON_ROOT_ID, help="fsGroup of those pods: the group their volumes belong to",
                           count=(0, MAX_ID), only=_non_root)
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
    # still given, so a kind with no place for one refuses it (_check_taken) rather than
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


def options() -> list[tuple[str, Option]]:
    """(field name, Option) of every `invoke manifests` option, in declaration order."""
    return [(f.name, f.metadata["option"]) for f in fields(JobSpec) if "option" in f.metadata]


def required() -> tuple[str, ...]:
    """The options with no default: a Regenerate line must name them."""
    return tuple(f.name for f in fields(JobSpec) if "option" in f.metadata and f.default is MISSING)


def default(name: str):
    """The field's default (MISSING for a required one)."""
    return next(f.default for f in fields(JobSpec) if f.name == name)


def given_apart() -> tuple[str, ...]:
    """The options whose default is a value some kind has no place for (--walltime's
    01:00:00 on a PyTorchJob): the task defaults them to '' (not given), so that a user who
    types the default value is seen (JobSpec.explicit) and refused by such a kind."""
    return tuple(name for name, how in options()
                 if how.kinds is not None and not how.count and not how.repeat and isinstance(default(name), str)
                 and default(name) != "")


def cli_options() -> list[tuple[str, object, str]]:
    """(parameter name, the task's default, help) of each option, for tasks.py: counts and
    required values are typed as text, so their task default is text too."""
    out: list[tuple[str, object, str]] = []
    apart = given_apart()
    for name, how in options():
        value = default(name)
        task_default = how.cli_default if how.cli_default is not None else str(value) if how.count else value
        if how.repeat:  # invoke's iterable flag: None makes it a list, [] when never given
            task_default = None
        if name in apart:  # '' when not given; the help says the default
            task_default = ""
            out.append((name, task_default, f"{how.help} (default: {value})"))
            continue
        out.append((name, task_default, how.help))
    return out


def given_defaults(given: dict) -> tuple[dict, frozenset[str]]:
    """The task's option values with given_apart()'s '' (not given) dropped, so the
    JobSpec default applies, and the names of those that were typed (JobSpec.explicit)."""
    apart = set(given_apart())
    kept = {k: v for k, v in given.items() if not (k in apart and v == "")}
    return kept, frozenset(k for k in apart if k in kept)


def parse_counts(given: dict) -> dict:
    """``given`` with every count option present parsed (parse_count, its flag and bounds);
    a spanned option typed MIN:MAX (parse_span) also fills its span field with MIN."""
    out = dict(given)
    for name, how in options():
        if how.count and name in out and how.span:
            low, out[name] = parse_span(flag(name), out[name], minimum=how.count[0], maximum=how.count[1])
            if low != out[name]:
                out[how.span] = low
        elif how.count and name in out:
            out[name] = parse_count(flag(name), out[name], minimum=how.count[0], maximum=how.count[1])
    return out


# A count's digits: enough for any bound here, few enough that int() never sees thousands
# of digits (Python refuses more than 4300 with a ValueError, not an InputError).
_SPAN = re.compile(r"([0-9]{1,18})(?::([0-9]{1,18}))?", _A)


def parse_span(flag: str, text, *, minimum: int, maximum: int) -> tuple[int, int]:
    """``N`` or ``MIN:MAX`` (torchrun's --nnodes form) typed on the command line: ASCII
    digits only, minimum <= MIN <= MAX <= maximum; N is N:N. Else one InputError naming
    the flag, the value and the form."""
    form = (f"expected a whole number from {minimum} to {maximum}, or MIN:MAX with {minimum} <= MIN <= MAX "
            f"<= {maximum}, e.g. 2:4 (ASCII digits only)")
    shown = f"{text[:40]!r}... ({len(text)} characters)" if isinstance(text, str) and len(text) > 40 else repr(text)
    if isinstance(text, bool) or not isinstance(text, (int, str)):
        raise InputError(f"{flag}={shown}; {form}")
    if isinstance(text, int):
        low = high = text
    else:
        m = _SPAN.fullmatch(text)
        if m is None:
            raise InputError(f"{flag}={shown}; {form}")
        low, high = int(m.group(1)), int(m.group(2) or m.group(1))
    if not minimum <= low <= high <= maximum:
        raise InputError(f"{flag}={shown}; {form}")
    return low, high


def parse_count(flag: str, text, *, minimum: int, maximum: int) -> int:
    """A count typed on the command line: ASCII digits only (no '2.5', '1e11', '²'),
    within [minimum, maximum]; else one InputError naming the flag."""
    if isinstance(text, bool) or not isinstance(text, (int, str)):
        raise InputError(f"{flag}={text!r}; expected a whole number from {minimum} to {maximum}")
    if isinstance(text, str) and (not _DIGITS.fullmatch(text) or len(text) > 18):
        raise InputError(f"{flag}={text!r}; expected a whole number from {minimum} to {maximum} "
                         "(ASCII digits only)")
    value = int(text)
    if not minimum <= value <= maximum:
        raise InputError(f"{flag}={text!r}; expected a whole number from {minimum} to {maximum}")
    return value


def image_problem(image: str) -> str | None:
    """Why ``image`` is not a valid, pinned reference (distribution/reference grammar; a
    version tag or a digest, never ``latest``), else None."""
    if not isinstance(image, str) or not image:
        return "is empty; expected REGISTRY/torchpod/pytorch:TAG or @sha256:DIGEST"
    rest, at, digest = image.partition("@")
    if at:
        algorithm, colon, hex_ = digest.partition(":")
        want = grammars.DIGEST_HEX.get(algorithm)
        if not colon or want is None:
            return (f"has digest {digest!r}; expected sha256:<64 lower-case hex digits> "
                    "(or sha512:<128>)")
        if len(hex_) != want or not grammars.HEX.fullmatch(hex_):
            return f"has digest {digest!r}; expected {algorithm}:<{want} lower-case hex digits>"
    name, tag = rest, ""
    if ":" in rest.rsplit("/", 1)[-1]:
        name, tag = rest.rsplit(":", 1)
        if not grammars.TAG.fullmatch(tag):
            return (f"has tag {tag!r}; expected a tag of at most 128 characters: letters, digits, '_', "
                    "'.', '-', not starting with '.' or '-'")
    if not grammars.NAME.fullmatch(name) or len(name) > grammars.NAME_MAX:
        return ("is not an image reference; expected [REGISTRY[:PORT]/]PATH[:TAG][@sha256:DIGEST] with a "
                "lower-case path of letters, digits and '.', '_', '-' separators (no spaces)")
    if at:
        return None
    if not tag:
        return "has no tag; expected REGISTRY/torchpod/pytorch:TAG or @sha256:DIGEST"
    if tag == "latest":
        return "uses the 'latest' tag, which moves; pin a version tag or @sha256:DIGEST"
    return None


def _check_label(flag: str, value, pattern: re.Pattern, limit: int, form: str) -> None:
    if not isinstance(value, str) or not pattern.fullmatch(value) or len(value) > limit:
        raise InputError(f"{flag}={value!r}; expected {form} of at most {limit} characters "
                         "(lower-case letters, digits, '-')")


def _check_endpoint(value) -> None:
    """HOST:PORT (or [IPv6]:PORT) with a port of 1-65535, as torch's etcd-v2 rendezvous
    parses it (parse_rendezvous_endpoint, torch/distributed/elastic/rendezvous/utils.py)."""
    form = f"expected HOST:PORT with a port of 1-65535, e.g. etcd.infra:{ETCD_PORT}"
    if not isinstance(value, str):
        raise InputError(f"--etcd-endpoint={value!r}; {form}")
    if value.startswith("["):
        host, close, port = value[1:].partition("]:")
        ok_host = bool(close) and re.fullmatch(r"[0-9a-fA-F:.]+", host, _A) is not None
    else:
        host, colon, port = value.rpartition(":")
        ok_host = bool(colon) and ":" not in host and _HOSTNAME.fullmatch(host) is not None
    if ":" not in value:
        raise InputError(f"--etcd-endpoint={value!r} has no port; {form}")
    if not ok_host or len(host) > 253:
        raise InputError(f"--etcd-endpoint={value!r}; {form} (host: letters, digits, '.', '-', '_')")
    if not _DIGITS.fullmatch(port) or not 1 <= int(port) <= 65535:
        raise InputError(f"--etcd-endpoint={value!r} has port {port!r}; {form}")


def check_command(command, *, empty_ok: bool = False) -> tuple[str, ...]:
    """The script and its arguments (or, ``empty_ok``, preflight's options, maybe none): any
    text, carried exactly, except what no target can hold: NUL (an argv entry ends there)
    and lone surrogates (not encodable as UTF-8)."""
    if not command and empty_ok:
        return ()
    if not command:
        raise InputError("no training script given; expected `-- train.py [ARGS...]` after the options")
    words = tuple(command)
    for i, word in enumerate(words):
        what = "the training script" if i == 0 else f"script argument {i}"
        if not isinstance(word, str):
            raise InputError(f"{what} is {word!r}; expected text")
        if "\0" in word:
            raise InputError(f"{what} {word!r} holds a NUL character, which no argv can carry; remove it")
        try:
            word.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(f"{what} {word!r} is not valid Unicode text (a lone surrogate, e.g. from "
                             "undecodable bytes); expected UTF-8 text") from None
    if not words[0]:
        raise InputError("the training script is ''; expected `-- train.py [ARGS...]` with a non-empty script")
    return words


def _check_names(spec: JobSpec) -> None:
    sitegrammar.check_job_name(spec.name, jobs.kind(spec.scheduler))
    _check_label("--namespace", spec.namespace, _DNS1123_LABEL, 63, "a DNS-1123 label")
    _check_label("--project", spec.project, _DNS1123_LABEL, 63, "a Run:ai project name (a DNS-1123 label)")
    if spec.image == "":
        raise InputError("--image is required; expected the image the nodes pull, REGISTRY/PATH/NAME:TAG or "
                         "REGISTRY/PATH/NAME@sha256:DIGEST (`invoke push` prints the latter)")
    problem = image_problem(spec.image)
    if problem:
        raise InputError(f"--image={spec.image!r} {problem}")
    if (not isinstance(spec.walltime, str) or not _WALLTIME.fullmatch(spec.walltime)
            or set(spec.walltime) <= {"0", ":"}):
        raise InputError(f"--walltime={spec.walltime!r}; expected HH:MM:SS or D-HH:MM:SS with hours of a day below "
                         "24, minutes and seconds below 60 and more than zero in all, e.g. 01:30:00 or 2-00:00:00")
    if spec.queue:
        sitegrammar.queues(spec.queue, jobs.kind(spec.scheduler))
    if spec.site_lib and (not isinstance(spec.site_lib, str) or not grammars.BIND_PATH.fullmatch(spec.site_lib)
                          or len(spec.site_lib) > grammars.BIND_PATH_MAX):
        raise InputError(f"--site-lib={spec.site_lib!r}; expected an absolute host path of {HOST_PATH_CHARS} "
                         "(no ',' or ':', which split a bind, and no spaces, quotes, '$', ';' or control "
                         "characters)")


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}", _A)
# Names a job's environment must leave to the job and its scheduler: what the launcher's
# detectors and torchrun read (a user's value would be a second, wrong answer), the GPU
# selection, and what the manifests set themselves (--preset names the preset).
RESERVED_ENV = frozenset({*(n for names in SCHEDULER_VARS.values() for n in names), *GPU_VARS,
                          "NVIDIA_DRIVER_CAPABILITIES", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK",
                          "LOCAL_RANK", "NODE_RANK", ENV_PRESET.name, ENV_COMMAND})


def check_env(items) -> tuple[str, ...]:
    """--env NAME=VALUE, each: a shell-style NAME not reserved (RESERVED_ENV, PET_*) and not
    given twice, and any VALUE an argv can carry (no NUL, valid Unicode)."""
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, str) or "=" not in item:
            raise InputError(f"--env={item!r}; expected NAME=VALUE, e.g. --env NCCL_DEBUG=INFO")
        name, _, value = item.partition("=")
        if not _ENV_NAME.fullmatch(name):
            raise InputError(f"--env={item[:80]!r} has name {name[:80]!r}; expected letters, digits and '_', not "
                             "starting with a digit (at most 128)")
        if name in RESERVED_ENV or name.startswith("PET_"):
            raise InputError(f"--env={name}=...: {name} is set by the job and its scheduler, and torchpod reads it; "
                             "expected another name (--preset, --nodes and torchrun's options say what it holds)")
        if name in seen:
            raise InputError(f"--env {name} is given twice; expected each name once")
        seen.add(name)
        if "\0" in value:
            raise InputError(f"--env {name}: its value holds a NUL character, which no environment can carry; "
                             "remove it")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(f"--env {name}: its value is not valid Unicode text (a lone surrogate, e.g. from "
                             "undecodable bytes); expected UTF-8 text") from None
    return tuple(items)


def _check_job_fields(spec: JobSpec) -> JobSpec:
    """The names, the site's fields and what the job brings to its pods, each in its grammar;
    the repeated options as tuples."""
    _check_names(spec)
    sitegrammar.check_site_fields(spec)
    sitegrammar.check_gpu_model(spec, jobs.kind(spec.scheduler))
    spec = replace(spec, env=check_env(spec.env), volume=tuple(spec.volume), node_selector=tuple(spec.node_selector),
                   toleration=tuple(spec.toleration))
    _check_pod_fields(spec)
    return spec


def _check_pod_fields(spec: JobSpec) -> None:
    """--volume, --workdir, --node-selector and --toleration in their grammars; an HPC job
    binds host paths alone (no PVC or ConfigMap outside Kubernetes)."""
    volumes = spec.volumes
    podfields.parse_selectors(spec.node_selector)
    _ = spec.tolerations
    if spec.workdir:
        podfields.check_workdir(spec.workdir)
    other = next((v for v in volumes if v.kind != "hostpath"), None)
    if not spec.kube and other is not None:
        raise InputError(f"--volume {other.kind}:{other.source}:{other.path} with --scheduler {spec.scheduler}: "
                         "a PVC or ConfigMap is a Kubernetes object; expected hostpath:/HOST/PATH:/MOUNT here")


def _check_resource(value) -> None:
    """A Kubernetes extended resource: a DNS-1123 subdomain prefix (at most 253), '/', a
    qualified name (at most 63)."""
    prefix, slash, name = value.partition("/") if isinstance(value, str) else ("", "", "")
    if (not slash or not _DNS1123_SUBDOMAIN.fullmatch(prefix) or len(prefix) > 253
            or not _QUALIFIED_NAME.fullmatch(name) or len(name) > 63):
        raise InputError(f"--rdma device-plugin needs --rdma-resource; got {value!r}, expected "
                         "the device plugin's resource name, e.g. rdma/rdma_shared_device_a")
    if value == GPU_RESOURCE:
        raise InputError(f"--rdma-resource={value!r} is the GPU resource, which --gpus-per-node already "
                         "requests; expected the RDMA device plugin's resource, e.g. rdma/rdma_shared_device_a")


def _check_ids(spec: JobSpec) -> None:
    """--run-as-user/--run-as-group/--fs-group only where the pods run as non-root."""
    given = next((n for n in ("run_as_user", "run_as_group", "fs_group") if getattr(spec, n) != NON_ROOT_ID), None)
    if given is None or _non_root(spec):
        return
    why = ("an HPC job runs as the user who submits it" if not spec.kube else "--privileged runs as root"
           if spec.privileged else f"--rdma {spec.rdma} needs IPC_LOCK, which Kubernetes grants to root alone "
           "(no ambient capabilities)")
    raise InputError(f"{flag(given)}={getattr(spec, given)} applies to pods that need no capability; {why}: "
                     "expected it left out")


def _walltime_in_hours(spec: JobSpec) -> JobSpec:
    """D-HH:MM:SS as hours (HH:MM:SS), which every batch system takes; an hour of the day of
    24 or more, or any other form, is left for the walltime check to refuse."""
    days = _WALLTIME_DAYS.fullmatch(spec.walltime) if isinstance(spec.walltime, str) else None
    if not days or int(days.group(2)) >= 24:
        return spec
    hours = int(days.group(1)) * 24 + int(days.group(2))
    return replace(spec, walltime=f"{hours:02d}:{days.group(3)}:{days.group(4)}")


def check(spec: JobSpec) -> JobSpec:
    """The spec, normalised; else one InputError naming the flag and the fix."""
    if spec.scheduler not in SCHEDULERS:
        raise InputError(f"--scheduler={spec.scheduler!r} is unknown; expected one of {', '.join(SCHEDULERS)}")
    counts = parse_counts({name: getattr(spec, name) for name, how in options() if how.count})
    spec = _walltime_in_hours(spec)
    if spec.min_nodes is not None and counts.get("min_nodes", spec.min_nodes) != spec.min_nodes:
        raise InputError(f"--nodes={spec.nodes!r} with min_nodes={spec.min_nodes!r}: two minimums; expected one")
    if spec.pod_security and spec.pod_security not in POD_SECURITY:
        raise InputError(f"--pod-security={spec.pod_security!r} is unknown; expected one of {', '.join(POD_SECURITY)}")
    if spec.workload not in WORKLOADS:
        raise InputError(f"--workload={spec.workload!r} is unknown; expected one of {', '.join(WORKLOADS)}")
    command = check_command(spec.command, empty_ok=spec.workload == "preflight")
    if spec.workload == "preflight":  # its options, as every worker will read them
        try:
            preflight.check_options(command)
        except InputError as exc:
            raise InputError(f"--workload preflight, the options after `--`: {exc}") from None
    spec = _check_node_range(replace(spec, **counts, command=command))
    _check_master_task(spec)
    spec = _check_job_fields(spec)
    _check_requeue(spec)
    _check_ids(spec)
    if spec.rdma not in RDMA:
        raise InputError(f"--rdma={spec.rdma!r} is unknown; expected one of {', '.join(RDMA)}")
    if spec.rdma == "device-plugin":
        _check_resource(spec.rdma_resource)
    if spec.rdma_resource and spec.rdma != "device-plugin":
        raise InputError(f"--rdma-resource={spec.rdma_resource!r} is only used with --rdma device-plugin; "
                         f"got --rdma {spec.rdma}")
    if spec.rdma != "none" and not spec.kube:
        raise InputError(f"--rdma={spec.rdma} is for Kubernetes pods; a {spec.scheduler} job runs on the "
                         "node's own network and devices: leave --rdma out")
    if spec.rdma == "hostnetwork" and jobs.kind(spec.scheduler).no_hostnetwork:
        raise InputError(f"--rdma hostnetwork with --scheduler {spec.scheduler}: "
                         f"{jobs.kind(spec.scheduler).no_hostnetwork}")
    if spec.preset:
        known = presets_mod.load()
        if spec.preset not in known:
            raise InputError(f"--preset={spec.preset!r} is unknown; expected one of {', '.join(sorted(known))}")
        shape = known[spec.preset]
        if spec.gpus_per_node > shape.gpus_per_node:
            raise InputError(f"--gpus-per-node={spec.gpus_per_node} but preset {spec.preset} is a shape with "
                             f"{shape.gpus_per_node} GPUs; expected {shape.gpus_per_node} or fewer")
    spec = _check_rdzv(spec)
    allowed = jobs.kind(spec.scheduler).runtimes  # (): every runtime (jobs.JobKind)
    runtime = spec.runtime or (allowed[0] if allowed else jobs.DEFAULT_RUNTIME if not spec.kube else "none")
    if runtime not in RUNTIMES:
        raise InputError(f"--runtime={spec.runtime!r} is unknown; expected one of {', '.join(RUNTIMES)}")
    if allowed and runtime not in allowed:
        raise InputError(f"--runtime={runtime} with --scheduler {spec.scheduler}, which runs the image itself; "
                         f"expected {jobs.choices(allowed)}: leave --runtime out")
    if spec.kube and runtime != "none":
        raise InputError(f"--runtime={runtime} is for HPC job scripts; Kubernetes runs the image itself: leave it out")
    _check_site(spec, runtime)
    _check_kind_limits(spec)
    _check_memory(spec)
    _check_taken(spec)
    return replace(spec, runtime=runtime)


def _check_taken(spec: JobSpec) -> None:
    """An option the job's kind cannot express (Option.kinds) is refused, never dropped."""
    for name, how in options():
        if how.kinds is None or spec.scheduler in how.kinds:
            continue
        if getattr(spec, name) == default(name) and name not in spec.explicit:
            continue
        value = getattr(spec, name)
        if isinstance(value, bool):
            given = flag(name)
        elif isinstance(value, (tuple, list)):  # a repeated option: each value as it was given
            given = " ".join(f"{flag(name)}={one}" for one in value)
        else:
            given = f"{flag(name)}={value}"
        raise InputError(f"{given}: a {spec.scheduler} job has no place for it, and it is never dropped "
                         f"silently; expected it left out, or --scheduler {jobs.choices(how.kinds)}")


def _size_mi(size: str) -> int:
    """MiB of a size the job itself wrote (JobSpec.shm_size: the preset's or NGi)."""
    return resources.parse_memory("/dev/shm", size)


def _check_memory(spec: JobSpec) -> None:
    """--memory-per-node in its grammar, and on Kubernetes above the memory-backed /dev/shm,
    which counts against the container's memory limit (emptyDir medium Memory)."""
    node = spec.per_node
    if spec.kube and node.memory_given and node.memory_mi <= _size_mi(spec.shm_size):
        usual = resources.kube_quantity(replace(spec, memory_per_node="").per_node.memory_mi)
        raise InputError(f"--memory-per-node={spec.memory_per_node} with a {spec.shm_size} /dev/shm: a pod's "
                         "memory-backed /dev/shm counts against its memory limit; expected more than "
                         f"{spec.shm_size}, e.g. {usual} (the default)")


def _check_node_range(spec: JobSpec) -> JobSpec:
    """min_nodes (from --nodes MIN:MAX, or given as a field) within 1..nodes, and only for
    the kinds that can run short of nodes (NODE_RANGE_KINDS); MIN = MAX is a fixed size."""
    low = spec.min_nodes
    if low is None:
        return spec
    if isinstance(low, bool) or not isinstance(low, int) or not 1 <= low <= spec.nodes:
        raise InputError(f"--nodes={low!r}:{spec.nodes}; expected MIN:MAX with 1 <= MIN <= MAX <= {MAX_NODES}, "
                         "e.g. 2:4 (ASCII digits only)")
    if low == spec.nodes:
        return replace(spec, min_nodes=None)
    if spec.scheduler not in NODE_RANGE_KINDS:
        raise InputError(f"--nodes={spec.nnodes} with --scheduler {spec.scheduler}: a {spec.scheduler} job has "
                         f"a fixed size; expected --nodes N, or MIN:MAX with --scheduler "
                         f"{jobs.choices(NODE_RANGE_KINDS)}")
    return spec


def option_text(spec: JobSpec, name: str) -> str:
    """An option's value as `invoke manifests` takes it (``--nodes 2:4`` for an elastic job)."""
    how = dict(options())[name]
    if how.span and getattr(spec, how.span) is not None:
        return f"{getattr(spec, how.span)}:{getattr(spec, name)}"
    return str(getattr(spec, name))


def _check_requeue(spec: JobSpec) -> None:
    """--requeue-lead: Slurm's alone (sbatch --signal and --requeue; no other kind carries
    it), and short enough that the job works before it is signalled: the signal may come
    SIGNAL_EARLY s before the lead, and a job signalled as it starts would requeue for ever."""
    if not spec.requeue_lead:
        return
    if spec.scheduler not in REQUEUE_KINDS:
        raise InputError(f"--requeue-lead={spec.requeue_lead} is for --scheduler {jobs.choices(REQUEUE_KINDS)} "
                         f"(sbatch --signal and --requeue); a {spec.scheduler} job cannot carry it: leave it out")
    hours, minutes, seconds = (int(part) for part in spec.walltime.split(":"))
    total = hours * 3600 + minutes * 60 + seconds
    if spec.requeue_lead + SIGNAL_EARLY >= total:
        fix = (f"a lead below {total - SIGNAL_EARLY} s, or a longer --walltime" if total - SIGNAL_EARLY > 1
               else f"a --walltime longer than {spec.requeue_lead + SIGNAL_EARLY} s")
        raise InputError(f"--requeue-lead={spec.requeue_lead} with --walltime={spec.walltime} ({total} s): Slurm may "
                         f"signal up to {SIGNAL_EARLY} s before the lead, so the job could be signalled as it "
                         f"starts and requeue for ever; expected {fix}")


def _check_rdzv(spec: JobSpec) -> JobSpec:
    if spec.rdzv not in RDZV:
        raise InputError(f"--rdzv={spec.rdzv!r} is unknown; expected one of {', '.join(RDZV)}")
    if spec.etcd_image != ETCD_IMAGE and not spec.etcd_server:
        raise InputError(f"--etcd-image={spec.etcd_image!r} names the image of the etcd Pod --etcd-server renders; "
                         "expected --rdzv etcd --etcd-server with it")
    if spec.etcd_server and (problem := image_problem(spec.etcd_image)):
        raise InputError(f"--etcd-image={spec.etcd_image!r} {problem}".replace("REGISTRY/torchpod/pytorch",
                                                                                "REGISTRY/etcd"))
    if spec.rdzv != "etcd":
        if spec.etcd_endpoint or spec.etcd_server:
            raise InputError("--etcd-endpoint/--etcd-server are for --rdzv etcd; got --rdzv c10d")
        return spec
    if spec.etcd_server and spec.etcd_endpoint:
        raise InputError(f"--etcd-server with --etcd-endpoint={spec.etcd_endpoint!r}: the job would use the "
                         "endpoint and never the etcd Pod; expected one of them")
    if spec.etcd_server and not spec.kube:
        raise InputError("--etcd-server renders a Kubernetes Pod; for an HPC job give --etcd-endpoint HOST:PORT")
    if not spec.etcd_endpoint and not spec.etcd_server:
        raise InputError("--rdzv etcd needs an etcd endpoint; expected --etcd-endpoint HOST:PORT (an etcd "
                         "serving the v2 API) or --etcd-server (render one next to the job)")
    if spec.etcd_endpoint:
        _check_endpoint(spec.etcd_endpoint)
        return spec
    return replace(spec, etcd_endpoint=f"{spec.etcd_service}:{ETCD_PORT}")


def image_arch(image: str) -> str | None:
    """The architecture a per-arch tag names (torchpod's ``VERSION-x86_64``/``-aarch64``, or
    the amd64/arm64 spellings), else None: a multi-arch tag or a bare digest names none."""
    name = image.partition("@")[0].rsplit("/", 1)[-1]
    if ":" not in name:
        return None
    try:
        return normalise_arch(name.rsplit(":", 1)[1].rsplit("-", 1)[-1]).name
    except InputError:
        return None


def pod_name_room(last_pod: str, nodes: int) -> int:
    """The longest --name a job of ``nodes`` pods can have when its last pod is named
    ``last_pod`` (JobKind.last_pod) and held, with JobSet's suffix, to a DNS label."""
    return DNS_LABEL_MAX - POD_SUFFIX - len(last_pod.format(name="", index=nodes - 1))


# Why a Kubernetes kind outside MNNVL_KINDS cannot carry --mnnvl (its record's no_mnnvl).
_NO_CLAIM = {k.name: k.no_mnnvl for k in jobs.KINDS if k.no_mnnvl}


def _check_mnnvl(spec: JobSpec) -> None:
    """--mnnvl: a kind whose pods can carry the claim (MNNVL_KINDS), GPUs, a fixed size (the
    ComputeDomain's numNodes), and no image tag naming an architecture GB200 cannot run."""
    if not isinstance(spec.mnnvl, bool):
        raise InputError(f"--mnnvl={spec.mnnvl!r}; expected a flag: given (true) or left out (false)")
    if not spec.mnnvl:
        return
    if not spec.kube:
        raise InputError(f"--mnnvl with --scheduler {spec.scheduler}: a ComputeDomain is a Kubernetes object "
                         f"(NVIDIA's DRA driver); a {spec.scheduler} job's nodes share an IMEX domain only as "
                         "the site's nvidia-imex service sets it up: leave --mnnvl out")
    if spec.scheduler not in MNNVL_KINDS:
        why = _NO_CLAIM.get(spec.scheduler, "its pods cannot carry a resource claim")
        raise InputError(f"--mnnvl with --scheduler {spec.scheduler}: {why}")
    if not spec.gpus_per_node:
        raise InputError("--mnnvl with --gpus-per-node 0: an IMEX channel shares GPU memory between nodes over "
                         "NVLink; expected --gpus-per-node 1 or more (a GB200 node has 4)")
    if spec.min_nodes is not None:
        raise InputError(f"--mnnvl with --nodes {spec.nnodes}: a ComputeDomain is made for a fixed number of "
                         "nodes (numNodes; with the driver's IMEXDaemonsWithDNSNames off every pod waits for "
                         "that many IMEX daemons); expected --nodes N")
    arch = image_arch(spec.image)
    if arch is not None and arch != MNNVL_ARCH:
        raise InputError(f"--image={spec.image!r} with --mnnvl: its tag names the {arch} build, and GB200 nodes "
                         f"are {MNNVL_ARCH} (Grace); expected the multi-arch tag or the -{MNNVL_ARCH} one")


def _check_master_task(spec: JobSpec) -> None:
    """A kind with a master task (JobKind.master_task) needs a worker beside it; the kind of
    the same model without one takes a single node."""
    kind = jobs.kind(spec.scheduler)
    if kind.master_task and spec.nodes < 2:
        alone = next(k.name for k in jobs.KINDS if k.model is kind.model and not k.master_task)
        raise InputError(f"--nodes={spec.nodes} with --scheduler {spec.scheduler}; expected 2 or more "
                         f"(one master task and at least one worker), or --scheduler {alone}")


def _check_kind_limits(spec: JobSpec) -> None:
    """What some kinds alone refuse: --mnnvl (_check_mnnvl), and a job whose last pod's name
    JobSet's webhook would refuse (JobKind.last_pod)."""
    _check_mnnvl(spec)
    last_pod = jobs.kind(spec.scheduler).last_pod
    room = pod_name_room(last_pod, spec.nodes) if last_pod else DNS_LABEL_MAX
    if last_pod and len(spec.name) > room:
        last = last_pod.format(name=spec.name, index=spec.nodes - 1)
        raise InputError(f"--name={spec.name!r} with --nodes {spec.nodes}: the {spec.scheduler} job's last pod would "
                         f"be {last!r}, over {DNS_LABEL_MAX} characters with the {POD_SUFFIX}-character suffix "
                         f"JobSet's webhook counts; expected a --name of at most {room} characters")


def _check_site(spec: JobSpec, runtime: str) -> None:
    if spec.volume and not spec.kube and runtime == "none":
        raise InputError(f"--volume {spec.volume[0]} with --runtime none: a host path is bound into a container, "
                         "and this job runs in the nodes' own environment, which sees the host's paths as they "
                         "are; expected it left out, or a container runtime")
    if spec.site_lib and runtime == "none":
        raise InputError(f"--site-lib={spec.site_lib} with --runtime none: it is bound into a container, and this "
                         "job runs in the nodes' own environment, where torchpod looks for the plugin itself; "
                         "expected it left out, or a container runtime")
    if spec.site_lib and spec.fabric != "slingshot":
        raise InputError(f"--site-lib is for Slingshot presets; preset {spec.preset or '(none)'} needs no site plugin "
                         "directory (EFA binds the EFA installer's /opt/amazon)")
    if spec.fabric == "slingshot" and runtime != "none" and not spec.site_lib:
        raise InputError(f"--preset {spec.preset} (Slingshot) with --runtime {runtime} needs --site-lib HOSTDIR: the "
                         "host directory with the site's aws-ofi-nccl build (libnccl-net.so), bound at " + SITE_LIB)
    if spec.fabric == "slingshot" and spec.kube:
        raise InputError(f"--preset {spec.preset} is a Slingshot HPC shape; "
                         "expected --scheduler slurm, pbs or pbs-pals")
