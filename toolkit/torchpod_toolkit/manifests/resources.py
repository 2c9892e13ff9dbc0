"""The CPUs and memory a job asks for on each node, for its launcher and workers: the
grammar of ``--cpus-per-node`` and ``--memory-per-node``, the defaults, and each target's
spelling of a size. Pure.

Without them a job gets what the site gives a job that asks for nothing: one CPU per task
under Slurm (srun's default, bound to it where the site binds tasks: task/affinity or
task/cgroup), a one-CPU cpuset and a small memory cap under OpenPBS's cgroups hook when the
chunk says ``ncpus=1`` and no ``mem=``, and no requests at all for a pod, which then runs
BestEffort: first to be evicted, and free to land on a node with no room for eight data
loaders. Where the job has the node to itself (Slurm ``--exclusive``, LSF ``-x``) the
default is the whole node; elsewhere it is sized from the GPUs (DEFAULT_*).
"""

from __future__ import annotations

from dataclasses import dataclass

from torchpod.errors import InputError

from .. import grammars

# Defaults sized for a GPU node: 8 CPUs and 32 GiB per GPU fit every 8-GPU cloud shape
# (96 to 224 vCPUs, 1 to 2 TiB) with room for the kubelet's reservation; a CPU job asks for
# a small node's worth. The memory covers the memory-backed /dev/shm (JobSpec.shm_size, 8 GiB
# per GPU), which Kubernetes counts against the container's memory limit.
CPUS_PER_GPU = 8
CPU_JOB_CPUS = 4
MEMORY_PER_GPU_MI = 32 * 1024
CPU_JOB_MEMORY_MI = 16 * 1024
MAX_CPUS_PER_NODE = 4096

# A size's binary units (grammars.BINARY_SIZE) in MiB
UNITS_MI = {"Mi": 1, "Gi": 1024, "Ti": 1024 * 1024}
MIN_MEMORY_MI = 256
MAX_MEMORY_MI = 64 * 1024 * 1024  # 64 TiB: above any node
MEMORY_FORM = ("expected a whole number and a binary unit, Mi, Gi or Ti (e.g. 256Gi, 1536Mi), "
               "from 256Mi to 64Ti")


def parse_memory(flag: str, value) -> int:
    """``value`` in MiB, or one InputError naming the flag, the value and the form."""
    shown = f"{value[:40]!r}..." if isinstance(value, str) and len(value) > 40 else repr(value)
    m = grammars.BINARY_SIZE.fullmatch(value) if isinstance(value, str) else None
    if m is None:
        raise InputError(f"{flag}={shown}; {MEMORY_FORM}")
    mi = int(m.group(1)) * UNITS_MI[m.group(2)]
    if not MIN_MEMORY_MI <= mi <= MAX_MEMORY_MI:
        raise InputError(f"{flag}={shown}; {MEMORY_FORM}")
    return mi


@dataclass(frozen=True)
class PerNode:
    """What one node's launcher and workers ask for. ``whole_node``: neither was given on
    a kind where the job can hold its nodes alone, which then asks for all of each node."""

    cpus: int
    memory_mi: int
    cpus_given: bool
    memory_given: bool

    @property
    def whole_node(self) -> bool:
        return not self.cpus_given


def per_node(gpus: int, cpus: int, memory: str) -> PerNode:
    """The node's request from --gpus-per-node, --cpus-per-node (0: the default) and
    --memory-per-node ('': the default)."""
    default_cpus = CPUS_PER_GPU * gpus if gpus else CPU_JOB_CPUS
    default_mi = MEMORY_PER_GPU_MI * gpus if gpus else CPU_JOB_MEMORY_MI
    mi = parse_memory("--memory-per-node", memory) if memory else default_mi
    return PerNode(cpus or default_cpus, mi, bool(cpus), bool(memory))


def _split(mi: int) -> tuple[int, str]:
    """(number, unit) in the largest binary unit that divides ``mi`` exactly."""
    for unit in ("Ti", "Gi"):
        if mi % UNITS_MI[unit] == 0:
            return mi // UNITS_MI[unit], unit
    return mi, "Mi"


def kube_quantity(mi: int) -> str:
    """A Kubernetes memory quantity: ``256Gi``."""
    number, unit = _split(mi)
    return f"{number}{unit}"


def slurm_size(mi: int) -> str:
    """sbatch --mem: a number and M, G or T, in 1024s (sbatch(1), --mem)."""
    number, unit = _split(mi)
    return f"{number}{unit[0]}"


def pbs_size(mi: int) -> str:
    """PBS's size: a number and mb, gb or tb, in 1024s (PBS Professional Reference Guide,
    "Size" format: kb = 1024 bytes)."""
    number, unit = _split(mi)
    return f"{number}{unit[0].lower()}b"


def lsf_size(mi: int) -> str:
    """LSF's rusage[mem=]: a number and MB, GB or TB (IBM LSF 10.1, "Specifying units for
    resource requirements and limits": units in 1024s)."""
    number, unit = _split(mi)
    return f"{number}{unit[0]}B"


def skypilot_gb(mi: int) -> str:
    """SkyPilot's resources.memory: GB, with ``+`` for at least that much."""
    gb = mi / 1024
    return f"{int(gb) if gb == int(gb) else round(gb, 3)}+"
