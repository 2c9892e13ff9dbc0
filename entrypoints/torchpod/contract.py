"""Every fact the launcher and the build-host toolkit share, each written once.

The launcher (this package) ships in every image; the toolkit (torchpod_toolkit) renders
manifests, builds images and runs the harness on the build host. Both must agree on the
ports a job listens on, the paths inside an image, the image's labels, the architectures
and the environment variables the launcher reads. Those facts live here, and the toolkit
imports them from here (tests/unit/test_layout.py enforces it) rather than from whichever
launcher module first needed them.

Standard library only, no I/O, nothing read at import: a module of constants and one
table. ``torchpod --help``'s environment section is generated from :data:`SETTINGS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .arch import ARCHES, Arch, normalise_arch  # arch.py owns the names (one normalising function)

__all__ = [
    "ARCHES", "Arch", "normalise_arch", "Setting", "SETTINGS", "OUTPUTS", "setting",
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
# The preflight workload, a module of the launcher: `torchpod run -m torchpod.preflight`,
# TORCHPOD_PREFLIGHT=1, `invoke manifests --workload preflight`, `invoke demo --workload preflight`.
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
class Setting:
    """One TORCHPOD_* variable the launcher reads: its name, what it does, its default."""

    name: str
    meaning: str
    default: str | None = None  # None: unset means "not given" (detection decides)


ENV_SCHEDULER = Setting("TORCHPOD_SCHEDULER", "force a scheduler instead of detecting one "
                        "(one of torchpod.schedulers' names, e.g. slurm, volcano, standalone)")
ENV_RDZV_PORT = Setting("TORCHPOD_RDZV_PORT", "port of the rendezvous endpoints torchpod builds from "
                        "host lists", str(RDZV_PORT_DEFAULT))
ENV_RDZV_TIMEOUT = Setting("TORCHPOD_RDZV_TIMEOUT", "seconds to wait for all nodes to join the rendezvous")
ENV_HOSTNAME = Setting("TORCHPOD_HOSTNAME", "this node's name as the scheduler's host list spells it",
                       "the hostname")
ENV_SYSFS_ROOT = Setting("TORCHPOD_SYSFS_ROOT", "where sysfs is read for RDMA devices", SYSFS_ROOT_DEFAULT)
ENV_PRESET = Setting("TORCHPOD_PRESET", "a machine shape whose NCCL fabric settings to apply "
                     "(torchpod/fabric/presets.json)")
ENV_DOCTOR = Setting("TORCHPOD_DOCTOR", "1: `run` refuses to start when the doctor's preflight fails", "0")
ENV_PREFLIGHT = Setting("TORCHPOD_PREFLIGHT", "1: `run` runs torchpod.preflight on every node first, in the "
                        "job's own workers, and starts the script only when no node failed", "0")
ENV_PREFLIGHT_UNDECIDED = Setting("TORCHPOD_PREFLIGHT_ALLOW_UNDECIDED", "1: preflight passes when its pairs cannot "
                                  "tell slow nodes from fast (two nodes without --floor-gbps, no pair above the "
                                  "floor, a node between a quarter and half the best pair), as --allow-undecided "
                                  "does; 0: it fails, naming the pairs", "0")
ENV_SITE_LIB = Setting("TORCHPOD_SITE_LIB", "':'-separated directories holding the site's NCCL net plugin "
                       f"and libfabric (else {SITE_LIB} and {SITE_DEPS}, then the vendors' host paths)")
ENV_NET_PIN = Setting("TORCHPOD_NCCL_NET_PIN", "1: on InfiniBand/RoCE pin NCCL_NET=IB so a job that cannot use "
                      "RDMA fails at init; 0: let NCCL fall back to sockets", "1")

# Every variable torchpod reads, in the order --help lists them.
SETTINGS: tuple[Setting, ...] = (ENV_SCHEDULER, ENV_RDZV_PORT, ENV_RDZV_TIMEOUT, ENV_HOSTNAME, ENV_SYSFS_ROOT,
                                 ENV_PRESET, ENV_DOCTOR, ENV_PREFLIGHT, ENV_PREFLIGHT_UNDECIDED, ENV_SITE_LIB,
                                 ENV_NET_PIN)

# The variables each batch system's detector reads (torchpod.schedulers.<name>.READS is this
# entry; tests/unit/torchpod/schedulers check that the detector reads no other). A job script
# hands exactly these, with SETTINGS, into a container runtime that starts with a cleared
# environment (enroot, docker, podman): a name left out there is a scheduler torchpod cannot
# see, and a job that trains alone on every node.
SCHEDULER_VARS: Mapping[str, tuple[str, ...]] = {
    "slurm": ("SLURM_JOB_ID", "SLURM_JOBID", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST",
              "SLURM_STEP_NUM_NODES", "SLURM_JOB_NUM_NODES", "SLURM_NNODES", "SLURM_NODEID", "SLURM_LOCALID",
              "SLURM_STEP_ID", "SLURM_STEPID", "SLURM_STEP_TASKS_PER_NODE", "SLURM_GPUS_ON_NODE",
              "SLURM_GPUS_PER_NODE"),
    "pbs": ("PBS_JOBID", "PBS_NODEFILE", "PALS_NODEID", "PBS_NODENUM", "PALS_LOCAL_RANKID"),
    "lsf": ("LSB_JOBID", "LSB_DJOB_HOSTFILE", "LSB_DJOB_RANKFILE", "LSB_MCPU_HOSTS", "JSM_NAMESPACE_LOCAL_RANK"),
}
# The variables that say which GPUs a process may use (CUDA runtime; NVIDIA Container
# Toolkit), read by torchpod.gpus.
GPU_VARS = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")

# Names torchpod writes, never reads: `torchpod plan --format shell`'s command variable, and
# the prefix of the result line workloads print for the containers-as-nodes harness.
ENV_COMMAND = "TORCHPOD_COMMAND"
RESULT_PREFIX = "TORCHPOD_RESULT "
OUTPUTS = (ENV_COMMAND, RESULT_PREFIX.strip())


def setting(env: Mapping[str, str], which: Setting) -> str:
    """The variable's value with surrounding blanks removed; "" when unset or blank."""
    return (env.get(which.name) or "").strip()
