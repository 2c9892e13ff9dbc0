"""The job kinds `invoke manifests` renders: one record each. Pure.

"Scheduler" means three things in torchpod: the launcher's detectors (torchpod.schedulers),
the containers-as-nodes harness's scenarios (cluster/topology.py) and the jobs rendered
here. A ``JobKind`` ties them: the ``--scheduler`` name, the detector `torchpod plan` finds
in the job's pods or nodes, the c10d port the job uses, the harness scenario that runs it,
the operator model of its manifest (manifests/operators.py; None for a batch script), and
what the cluster must run. spec (``--scheduler`` choices), render (the header, the file
names), tasks.py (choices and help) and the harness derive from ``KINDS``; a unit test
checks each record against the detectors and the harness (tests/unit/torchpod_toolkit/manifests/test_jobs.py).

Ports (torchpod.contract, which cites each upstream): Volcano's pytorch plugin and
training-operator open PYTORCHJOB_PORT; Trainer v2 fixes TRAINER_PORT; a worker-only
Volcano job, a LeaderWorkerSet, a JobSet and the HPC jobs name no port, so the launcher
builds the endpoint from the host list (or the LWS leader's or first JobSet pod's name)
with RDZV_PORT_DEFAULT (TORCHPOD_RDZV_PORT).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Optional

from torchpod.contract import PYTORCHJOB_PORT, RDZV_PORT_DEFAULT, TRAINER_PORT
from torchpod.errors import InputError

from . import operators

Model = Callable[..., list]

# The container runtimes an HPC job can run the image with (``--runtime``); hpc.RUNTIMES
# holds one record of each, in this order, and a unit test holds the two to each other.
RUNTIMES: tuple[str, ...] = ("apptainer", "enroot", "podman", "docker", "none")
DEFAULT_RUNTIME = "apptainer"  # what an HPC job uses when --runtime is not given


@dataclass(frozen=True)
class JobKind:
    name: str  # the --scheduler value
    detector: str  # the torchpod.schedulers NAME `torchpod plan` detects in the job's pods/nodes
    port: int  # the job's c10d port
    scenario: str  # the harness scenario (cluster/topology.py) that runs this job
    model: Optional[Model]  # operators' model of the manifest's job object; None: a batch script
    requires: Optional[str]  # the operator the cluster must run (Kubernetes kinds)
    submit: str  # the command that submits the rendered file
    suffix: str  # the rendered file's extension
    fan_out: str = ""  # how an HPC job starts one launcher per node, when the header names it
    marker: str = ""  # a variable only this kind's pods carry among kinds of the same model
    runtimes: tuple[str, ...] = ()  # the --runtime values a batch kind takes, the first its default; (): all

    @property
    def kube(self) -> bool:
        return self.model is not None


_KUBECTL = "kubectl apply -f"

KINDS: tuple[JobKind, ...] = (
    JobKind("volcano", "volcano", RDZV_PORT_DEFAULT, "volcano", operators.volcano,
            "Volcano >= 1.9 (its env and svc job plugins)", _KUBECTL, "yaml"),
    JobKind("volcano-master", "volcano", PYTORCHJOB_PORT, "volcano-master", operators.volcano,
            "Volcano >= 1.9 (its env, svc and pytorch job plugins)", _KUBECTL, "yaml"),
    JobKind("kubeflow", "kubeflow", PYTORCHJOB_PORT, "kubeflow", operators.pytorchjob,
            "Kubeflow training-operator >= 1.7 (PET_* variables)", _KUBECTL, "yaml"),
    JobKind("kubeflow-elastic", "kubeflow", PYTORCHJOB_PORT, "kubeflow-elastic", operators.pytorchjob,
            "Kubeflow training-operator >= 1.7 (elasticPolicy)", _KUBECTL, "yaml"),
    JobKind("trainer", "kubeflow", TRAINER_PORT, "trainer", operators.trainjob,
            "Kubeflow Trainer v2 with the torch-distributed ClusterTrainingRuntime", _KUBECTL, "yaml"),
    # Run:ai's pods are a PyTorchJob's plus RUNAI_JOB_NAME (operators.pytorchjob)
    JobKind("runai", "runai", PYTORCHJOB_PORT, "runai", operators.pytorchjob,
            "Run:ai with its PyTorch (training-operator) support", _KUBECTL, "yaml", marker="RUNAI_JOB_NAME"),
    JobKind("lws", "lws", RDZV_PORT_DEFAULT, "lws", operators.leaderworkerset,
            "LeaderWorkerSet (kubernetes-sigs/lws) >= 0.6 on Kubernetes >= 1.27", _KUBECTL, "yaml"),
    JobKind("jobset", "jobset", RDZV_PORT_DEFAULT, "jobset", operators.jobset,
            "JobSet (kubernetes-sigs/jobset) >= 0.7", _KUBECTL, "yaml"),
    JobKind("slurm", "slurm", RDZV_PORT_DEFAULT, "slurm", None, None, "sbatch", "sbatch"),
    JobKind("pbs", "pbs", RDZV_PORT_DEFAULT, "pbs", None, None, "qsub", "sh", fan_out="pbsdsh"),
    JobKind("pbs-pals", "pbs", RDZV_PORT_DEFAULT, "pbs-pals", None, None, "qsub", "sh",
            fan_out="Cray PALS mpiexec"),
    JobKind("lsf", "lsf", RDZV_PORT_DEFAULT, "lsf", None, None, "bsub <", "bsub", fan_out="blaunch -u"),
    # SkyPilot runs the image itself (image_id docker:): torchpod is in the task's environment
    JobKind("skypilot", "skypilot", RDZV_PORT_DEFAULT, "skypilot", None, None, "sky launch", "yaml",
            fan_out="`run` starts on every node, in the image; GPU type H100, change it to yours",
            runtimes=("none",)),
)

BY_NAME: Mapping[str, JobKind] = {k.name: k for k in KINDS}
NAMES: tuple[str, ...] = tuple(BY_NAME)
KUBE: tuple[str, ...] = tuple(k.name for k in KINDS if k.kube)
HPC: tuple[str, ...] = tuple(k.name for k in KINDS if not k.kube)


def choices(names: tuple[str, ...] = NAMES) -> str:
    """``a, b or c``: how help text lists the kinds."""
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else "".join(names)


def kind(name: str) -> JobKind:
    if name not in BY_NAME:
        raise InputError(f"--scheduler={name!r} is unknown; expected one of {', '.join(NAMES)}")
    return BY_NAME[name]


def of_pods(model: Model, env_names) -> JobKind:
    """The kind whose operator model made pods carrying ``env_names`` (the first pod's
    variables): the one whose marker is there, else the first of that model with none."""
    candidates = [k for k in KINDS if k.model is model]
    if not candidates:
        raise InputError(f"no job kind is modelled by {getattr(model, '__name__', model)!r}")
    marked = [k for k in candidates if k.marker and k.marker in env_names]
    return marked[0] if marked else next(k for k in candidates if not k.marker)
