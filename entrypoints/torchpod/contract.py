"""Every fact the launcher and the build-host toolkit share, each written once.

The launcher (this package) ships in every image; the toolkit (torchpod_toolkit) renders
manifests, builds images and runs the harness on the build host. Both must agree on the
ports a job listens on, the paths inside an image, the image's labels, the architectures
and the environment variables the launcher reads. Those facts live here, and the toolkit
imports them from here (tests/unit/test_layout.py enforces it) rather than from whichever
launcher module first needed them.

Standard library only, no I/O, nothing read at import: a module of constants and one
table. Each setting declares the form its value takes, and every reader goes through
:func:`setting` (or :func:`switch`, :func:`number`), so a switch set to ``yes`` means the same
everywhere: it is refused in one line. ``torchpod --help``'s environment section, and each
command's, is generated from :data:`SETTINGS`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Mapping

from .arch import ARCHES, Arch, normalise_arch  # arch.py owns the names (one normalising function)
from .errors import InputError  # a leaf too: the one error family a refused value is

__all__ = [
    "ARCHES", "Arch", "normalise_arch", "Setting", "SETTINGS", "OUTPUTS", "setting", "switch", "number",
    "check_settings", "Form", "SWITCH", "PORT", "SECONDS", "NAME", "HOST", "PATHS", "TEXT", "COMMANDS",
    "ENV_SCHEDULER", "ENV_RDZV_PORT", "ENV_RDZV_TIMEOUT", "ENV_HOSTNAME", "ENV_SYSFS_ROOT",
    "ENV_PRESET", "ENV_DOCTOR", "ENV_PREFLIGHT", "ENV_PREFLIGHT_UNDECIDED", "ENV_SITE_LIB", "ENV_COMMAND",
    "RESULT_PREFIX",
    "RDZV_PORT_DEFAULT", "TORCHRUN_MASTER_PORT", "PYTORCHJOB_PORT", "TRAINER_PORT", "ETCD_PORT",
    "EPHEMERAL_PORTS", "SYSFS_ROOT_DEFAULT", "IMAGE_PLUGIN_DIR", "IMAGE_PLUGIN", "IMAGE_PLUGIN_LIBFABRIC",
    "SITE_LIB", "SITE_DEPS", "EXAMPLES_DIR", "PREFLIGHT_MODULE", "LABEL_PREFIX", "LABEL_KEYS",
    "LOCK_LABEL_KEYS", "label",
    "JOBSET_LABEL_ENV", "SCHEDULER_VARS", "GPU_VARS",
]

# --- ports ---------------------------------------------------------------------------
# torchpod's own: the port of every rendezvous endpoint torchpod builds from a host list.
# It is torch's c10d rendezvous default (torch/distributed/elastic/rendezvous/
# c10d_rendezvous_backend.py, DEFAULT_PORT), so `--rdzv-endpoint host` means the same port.
RDZV_PORT_DEFAULT = 29400
# torchrun's --master-port default (torch/distributed/run.py, get_args_parser).
TORCHRUN_MASTER_PORT = 29500
# training-operator's PyTorchJobDefaultPort (kubeflow/training-operator pkg/apis/kubeflow.org/
# v1 pytorch_types.go) and the Volcano pytorch plugin's DefaultPort (volcano-sh/volcano
# pkg/controllers/job/plugins/distributed-framework/pytorch/pytorch.go): both 23456.
PYTORCHJOB_PORT = 23456
# Trainer v2 fixes the trainer node's port (kubeflow/trainer pkg/constants, ContainerTrainerPort).
TRAINER_PORT = 29500
# etcd's client port (IANA-registered; etcd-io/etcd embed/config.go DefaultListenClientURLs).
ETCD_PORT = 2379
# Linux's default net.ipv4.ip_local_port_range: a listener there can collide with an
# outgoing connection's port.
EPHEMERAL_PORTS = (32768, 60999)

# --- paths inside an image -----------------------------------------------------------
SYSFS_ROOT_DEFAULT = "/sys"
# An image variant's own NCCL net plugin (docker/Dockerfile's netplugin stage installs it).
IMAGE_PLUGIN_DIR = "/opt/torchpod/nccl-net"
IMAGE_PLUGIN = IMAGE_PLUGIN_DIR + "/lib/libnccl-net.so"
# The libfabric version the image's plugin was compiled against (written by the Dockerfile).
IMAGE_PLUGIN_LIBFABRIC = IMAGE_PLUGIN_DIR + "/LIBFABRIC_BUILT_AGAINST"
# The documented mount points for a site's injected plugin and libfabric, and for their
# dependencies (libcxi.so.1, ...): torchpod.fabric.site.
SITE_LIB = "/opt/torchpod/site/lib"
SITE_DEPS = "/opt/torchpod/site/deps"
# The example workloads copied into every image (the Dockerfile's EXAMPLES_DIR).
EXAMPLES_DIR = "/opt/torchpod/examples"
# The preflight workload, a module of the launcher: `torchpod preflight` (the same as
# `torchpod run -m torchpod.preflight`), TORCHPOD_PREFLIGHT=1, `invoke manifests --workload
# preflight`, `invoke demo --workload preflight`.
PREFLIGHT_MODULE = "torchpod.preflight"

# --- image labels ----------------------------------------------------------------------
LABEL_PREFIX = "io.torchpod"
# What the build reads back from an image and writes as io.torchpod.<key> (never from the YAML).
LABEL_KEYS = ("torch", "torchvision", "cuda", "nccl", "python", "rdma-core", "nccl-net-plugin", "libfabric")
# What the build knows from the image's locks before Docker runs: each lock's sha256, the SBOM's,
# and the oldest NVIDIA driver the locked CUDA runtime runs on (io.torchpod.cuda-driver-min).
LOCK_LABEL_KEYS = ("lock.wheels", "lock.debian", "sbom", "cuda-driver-min")


def label(key: str) -> str:
    """The full label name of ``key`` (``io.torchpod.<key>``)."""
    return f"{LABEL_PREFIX}.{key}"


# --- JobSet's pod labels ----------------------------------------------------------------
# JobSet sets no environment variable; its controller labels every pod
# (kubernetes-sigs/jobset pkg/controllers/jobset_controller.go labelAndAnnotateObject,
# v0.12.0). A manifest passes these labels by the downward API under these names, which
# the launcher's jobset detector reads.
JOBSET_LABEL_ENV: Mapping[str, str] = {
    "JOBSET_NAME": "jobset.sigs.k8s.io/jobset-name",
    "REPLICATED_JOB_NAME": "jobset.sigs.k8s.io/replicatedjob-name",
    "JOB_INDEX": "jobset.sigs.k8s.io/job-index",
    "JOB_GLOBAL_INDEX": "jobset.sigs.k8s.io/job-global-index",
    "GLOBAL_REPLICAS": "jobset.sigs.k8s.io/global-replicas",
}


# --- the environment variables torchpod reads -----------------------------------------
@dataclass(frozen=True)
class Form:
    """How a setting's text is read: what it is, the form a refusal names, and the test
    the text (surrounding blanks removed, never blank) must pass."""

    what: str  # "a switch"
    expected: str  # "0 or 1"
    accepts: Callable[[str], bool]


def _matching(pattern: str) -> Callable[[str], bool]:
    compiled = re.compile(pattern, re.ASCII)  # fullmatch: '$' would let a trailing newline in
    return lambda text: compiled.fullmatch(text) is not None


def _whole(lo: int, hi: int) -> Callable[[str], bool]:
    # ASCII digits only: int() also takes '٣' and '²', which torchrun, NCCL and the shell do not
    return lambda text: re.fullmatch(r"[+]?[0-9]{1,18}", text, re.ASCII) is not None and lo <= int(text) <= hi


def _printable(text: str) -> bool:
    """No control, format or line-separator character: a value that can end a line or drive
    a terminal never reaches a message, a plan or a child's environment."""
    return all(ch.isprintable() for ch in text)


SWITCH = Form("a switch", "1 or 0", lambda text: text in ("0", "1"))
PORT = Form("a TCP port", "a whole number 1-65535", _whole(1, 65535))
SECONDS = Form("a number of seconds", "a whole number of seconds, at least 1", _whole(1, 10**9))
NAME = Form("a name", "letters, digits, '.', '_' and '-'", _matching(r"[A-Za-z0-9_.-]{1,128}"))
HOST = Form("a host name", "a name as the host list spells it: letters, digits, '.', '-', '_' and ':'",
            _matching(r"[A-Za-z0-9_.:-]{1,253}"))
PATHS = Form("a path", "paths (':'-separated where several are taken) without control characters", _printable)
WINDOW = Form("a stall window", "off, or a whole number of seconds from 10 to 86400",
              lambda text: text == "off" or _whole(10, 86_400)(text))
TEXT = Form("text", "printable text, without control characters", _printable)

# The launcher's commands, and which of them read a setting. bench and preflight are
# `run` with a workload of torchpod's own, so they read everything `run` reads; `plan` is
# the plan of a run, so it checks those too: a value `run` would refuse, `plan` refuses.
COMMANDS = ("plan", "run", "doctor", "bench", "preflight", "stacks")
_LAUNCHING = ("plan", "run", "bench", "preflight")
_FABRIC = (*_LAUNCHING, "doctor")


@dataclass(frozen=True)
class Setting:
    """One TORCHPOD_* variable the launcher reads: its name, what it does, its default, the
    form its value takes and the commands that read it (each command's --help lists them)."""

    name: str
    meaning: str
    default: str | None = None  # None: unset means "not given" (detection decides)
    form: Form = TEXT
    commands: tuple[str, ...] = ()


ENV_SCHEDULER = Setting("TORCHPOD_SCHEDULER", "force a scheduler instead of detecting one "
                        "(one of torchpod.schedulers' names, e.g. slurm, volcano, standalone, or auto)",
                        form=NAME, commands=_LAUNCHING)
ENV_RDZV_PORT = Setting("TORCHPOD_RDZV_PORT", "port of the rendezvous endpoints torchpod builds from "
                        "host lists", str(RDZV_PORT_DEFAULT), form=PORT, commands=_LAUNCHING)
ENV_RDZV_TIMEOUT = Setting("TORCHPOD_RDZV_TIMEOUT", "seconds to wait for all nodes to join the rendezvous",
                           form=SECONDS, commands=_LAUNCHING)
ENV_HOSTNAME = Setting("TORCHPOD_HOSTNAME", "this node's name as the scheduler's host list spells it",
                       "the hostname", form=HOST, commands=(*_LAUNCHING, "stacks"))
ENV_SYSFS_ROOT = Setting("TORCHPOD_SYSFS_ROOT", "where sysfs is read for RDMA devices", SYSFS_ROOT_DEFAULT,
                         form=PATHS, commands=_FABRIC)
ENV_PRESET = Setting("TORCHPOD_PRESET", "a machine shape whose NCCL fabric settings to apply "
                     "(torchpod/fabric/presets.json)", form=NAME, commands=_FABRIC)
ENV_DOCTOR = Setting("TORCHPOD_DOCTOR", "1: `run` refuses to start when the doctor's preflight fails", "0",
                     form=SWITCH, commands=_LAUNCHING)
ENV_PREFLIGHT = Setting("TORCHPOD_PREFLIGHT", "1: `run` runs torchpod.preflight on every node first, in the "
                        "job's own workers, and starts the script only when no node failed", "0",
                        form=SWITCH, commands=("plan", "run", "bench"))  # `preflight` is preflight already
ENV_PREFLIGHT_UNDECIDED = Setting("TORCHPOD_PREFLIGHT_ALLOW_UNDECIDED", "1: preflight passes when its pairs cannot "
                                  "tell slow nodes from fast (two nodes without --floor-gbps, no pair above the "
                                  "floor, a node between a quarter and half the best pair), as --allow-undecided "
                                  "does; 0: it fails, naming the pairs", "0", form=SWITCH, commands=_LAUNCHING)
ENV_SITE_LIB = Setting("TORCHPOD_SITE_LIB", "':'-separated directories holding the site's NCCL net plugin "
                       f"and libfabric (else {SITE_LIB} and {SITE_DEPS}, then the vendors' host paths)",
                       form=PATHS, commands=_FABRIC)
ENV_NET_PIN = Setting("TORCHPOD_NCCL_NET_PIN", "1: on InfiniBand/RoCE pin NCCL_NET=IB so a job that cannot use "
                      "RDMA fails at init; 0: let NCCL fall back to sockets", "1", form=SWITCH, commands=_FABRIC)
ENV_STALL_WINDOW = Setting("TORCHPOD_STALL_WINDOW", "seconds without a rank going past a collective others wait in "
                           "(or without its beat) before the job's stacks and flight recorder are gathered, the "
                           "culprit named and the job ended with exit code 124 (torchpod.watch); off: not watched",
                           "300", form=WINDOW, commands=_LAUNCHING)

# Every variable torchpod reads, in the order --help lists them.
SETTINGS: tuple[Setting, ...] = (ENV_SCHEDULER, ENV_RDZV_PORT, ENV_RDZV_TIMEOUT, ENV_HOSTNAME, ENV_SYSFS_ROOT,
                                 ENV_PRESET, ENV_DOCTOR, ENV_PREFLIGHT, ENV_PREFLIGHT_UNDECIDED, ENV_SITE_LIB,
                                 ENV_NET_PIN, ENV_STALL_WINDOW)

# The variables each batch system's detector reads (torchpod.schedulers.<name>.READS is this
# entry; tests/unit/torchpod/schedulers check that the detector reads no other). A job script
# hands exactly these, with SETTINGS, into a container runtime that starts with a cleared
# environment (enroot, docker, podman): a name left out there is a scheduler torchpod cannot
# see, and a job that trains alone on every node.
SCHEDULER_VARS: Mapping[str, tuple[str, ...]] = {
    "slurm": ("SLURM_JOB_ID", "SLURM_JOBID", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST",
              "SLURM_STEP_NUM_NODES", "SLURM_JOB_NUM_NODES", "SLURM_NNODES", "SLURM_NODEID", "SLURM_LOCALID",
              "SLURM_STEP_ID", "SLURM_STEPID", "SLURM_STEP_TASKS_PER_NODE", "SLURM_GPUS_ON_NODE",
              "SLURM_GPUS_PER_NODE", "SLURM_TOPOLOGY_ADDR", "SLURM_TOPOLOGY_ADDR_PATTERN"),
    "pbs": ("PBS_JOBID", "PBS_NODEFILE", "PALS_NODEID", "PBS_NODENUM", "PALS_LOCAL_RANKID"),
    "lsf": ("LSB_JOBID", "LSB_DJOB_HOSTFILE", "LSB_DJOB_RANKFILE", "LSB_MCPU_HOSTS", "JSM_NAMESPACE_LOCAL_RANK"),
}
# The variables that say which GPUs a process may use (CUDA runtime; NVIDIA Container
# Toolkit), read by torchpod.gpus.
GPU_VARS = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")

# Names torchpod writes, never reads as a setting: `torchpod plan --format shell`'s command
# variable; the node number the plan names, in the workers' environment, so that a workload
# (torchpod.preflight) names a node as the plan did where torch's GROUP_RANK differs (a
# topology order); the private folder `torchpod run` made for its workers' stack dumps
# (torchpod.stacks, read by `torchpod stacks`); and the prefix of the result line workloads
# print for the containers-as-nodes harness.
ENV_COMMAND = "TORCHPOD_COMMAND"
ENV_NODE_RANK = "TORCHPOD_NODE_RANK"
ENV_STACKS_DIR = "TORCHPOD_STACKS_DIR"
RESULT_PREFIX = "TORCHPOD_RESULT "
OUTPUTS = (ENV_COMMAND, ENV_NODE_RANK, ENV_STACKS_DIR, RESULT_PREFIX.strip())


def setting(env: Mapping[str, str], which: Setting) -> str:
    """The variable's value with surrounding blanks removed, once its form accepts it; ""
    when unset or blank (a job script that forwards an unset name hands it over blank).
    A value its form refuses is one line naming the variable, the value and the form."""
    value = (env.get(which.name) or "").strip()
    if value and not which.form.accepts(value):
        shown = value if len(value) <= 80 else value[:80] + "..."
        raise InputError(f"{which.name}={shown!r} is not {which.form.what}; expected {which.form.expected} "
                         f"({which.meaning})")
    return value


def switch(env: Mapping[str, str], which: Setting) -> bool:
    """A SWITCH setting: True for 1, False for 0, its default when unset or blank."""
    return (setting(env, which) or which.default or "0") == "1"


def number(env: Mapping[str, str], which: Setting) -> int | None:
    """A whole-number setting (PORT, SECONDS); None when unset or blank."""
    value = setting(env, which)
    return int(value) if value else None


def check_settings(env: Mapping[str, str], command: str) -> None:
    """Every setting ``command`` reads, checked against its form before the command starts,
    so a bad value is refused the same way whichever step would have read it first."""
    for which in SETTINGS:
        if command in which.commands:
            setting(env, which)
