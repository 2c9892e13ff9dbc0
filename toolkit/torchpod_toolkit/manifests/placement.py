"""Where a job runs: its kind (--scheduler), its nodes (a fixed size or MIN:MAX), the shape
preset it is written for, and what some kinds alone refuse (--mnnvl, a last pod name JobSet's
webhook would refuse). Pure; each step raises one InputError naming the flag.
"""

from __future__ import annotations

from dataclasses import replace

from torchpod.errors import InputError
from torchpod.fabric import presets as presets_mod

from . import jobs, sitegrammar
from .jobspec import MAX_NODES, MNNVL_KINDS, NODE_RANGE_KINDS, SCHEDULERS, JobSpec
from .names import image_arch

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
# Why a Kubernetes kind outside MNNVL_KINDS cannot carry --mnnvl (its record's no_mnnvl).
NO_CLAIM = {k.name: k.no_mnnvl for k in jobs.KINDS if k.no_mnnvl}



def check_scheduler(spec: JobSpec) -> JobSpec:
    """--scheduler one of the kinds (jobs.KINDS)."""
    if spec.scheduler not in SCHEDULERS:
        raise InputError(f"--scheduler={spec.scheduler!r} is unknown; expected one of {', '.join(SCHEDULERS)}")
    return spec


def check_node_range(spec: JobSpec) -> JobSpec:
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


def check_master_task(spec: JobSpec) -> JobSpec:
    """A kind with a master task (JobKind.master_task) needs a worker beside it; the kind of
    the same model without one takes a single node."""
    kind = jobs.kind(spec.scheduler)
    if kind.master_task and spec.nodes < 2:
        alone = next(k.name for k in jobs.KINDS if k.model is kind.model and not k.master_task)
        raise InputError(f"--nodes={spec.nodes} with --scheduler {spec.scheduler}; expected 2 or more "
                         f"(one master task and at least one worker), or --scheduler {alone}")
    return spec


def check_preset(spec: JobSpec) -> JobSpec:
    """--preset one of torchpod's shape presets, with no more GPUs per node than its shape."""
    if not spec.preset:
        return spec
    known = presets_mod.load()
    if spec.preset not in known:
        raise InputError(f"--preset={spec.preset!r} is unknown; expected one of {', '.join(sorted(known))}")
    shape = known[spec.preset]
    if spec.gpus_per_node > shape.gpus_per_node:
        raise InputError(f"--gpus-per-node={spec.gpus_per_node} but preset {spec.preset} is a shape with "
                         f"{shape.gpus_per_node} GPUs; expected {shape.gpus_per_node} or fewer")
    return spec


def pod_name_room(last_pod: str, nodes: int) -> int:
    """The longest --name a job of ``nodes`` pods can have when its last pod is named
    ``last_pod`` (JobKind.last_pod) and held, with JobSet's suffix, to a DNS label."""
    return DNS_LABEL_MAX - POD_SUFFIX - len(last_pod.format(name="", index=nodes - 1))


def check_mnnvl(spec: JobSpec) -> None:
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
        why = NO_CLAIM.get(spec.scheduler, "its pods cannot carry a resource claim")
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


def check_kind_limits(spec: JobSpec) -> JobSpec:
    """What some kinds alone refuse: --mnnvl (check_mnnvl), and a job whose last pod's name
    JobSet's webhook would refuse (JobKind.last_pod)."""
    check_mnnvl(spec)
    last_pod = jobs.kind(spec.scheduler).last_pod
    room = pod_name_room(last_pod, spec.nodes) if last_pod else DNS_LABEL_MAX
    if last_pod and len(spec.name) > room:
        last = last_pod.format(name=spec.name, index=spec.nodes - 1)
        raise InputError(f"--name={spec.name!r} with --nodes {spec.nodes}: the {spec.scheduler} job's last pod would "
                         f"be {last!r}, over {DNS_LABEL_MAX} characters with the {POD_SUFFIX}-character suffix "
                         f"JobSet's webhook counts; expected a --name of at most {room} characters")
    return spec
