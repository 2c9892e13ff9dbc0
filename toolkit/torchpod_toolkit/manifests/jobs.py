"""The job kinds `invoke manifests` renders, assembled from their modules (manifests/kinds/). Pure.

"Scheduler" means three things in torchpod: the launcher's detectors (torchpod.schedulers),
the containers-as-nodes harness's scenarios (cluster/scenarios.py) and the jobs rendered
here. A ``JobKind`` (kinds/record.py) ties them: the ``--scheduler`` name, the detector
`torchpod plan` finds in the job's pods or nodes, the c10d port the job uses, the harness
scenario that runs it, the operator model of its manifest (manifests/models/; None for
a batch script), what the cluster must run, its renderer, and what the job can say. spec
(``--scheduler`` choices, which kinds take an option), the renderers, render (the header,
the file names), tasks.py (choices and help) and the harness derive from ``KINDS``; a unit
test checks each record against the detectors and the harness
(tests/unit/torchpod_toolkit/manifests/test_jobs.py).

Ports (torchpod.contract, which cites each upstream): Volcano's pytorch plugin and
training-operator open PYTORCHJOB_PORT; Trainer v2 fixes TRAINER_PORT; a worker-only
Volcano job, a LeaderWorkerSet, a JobSet and the HPC jobs name no port, so the launcher
builds the endpoint from the host list (or the LWS leader's or first JobSet pod's name)
with RDZV_PORT_DEFAULT (TORCHPOD_RDZV_PORT).
"""

from __future__ import annotations

from typing import Mapping

from torchpod.errors import InputError

from .kinds import KINDS
from .kinds.record import RESTARTS, JobKind, Model, Nodes, Ref

__all__ = ["KINDS", "JobKind", "Model", "Nodes", "Ref", "RESTARTS", "RUNTIMES", "DEFAULT_RUNTIME", "BY_NAME", "NAMES",
           "KUBE", "HPC", "choices", "kind", "having", "of_pods"]

# The container runtimes an HPC job can run the image with (``--runtime``); runtimes.RUNTIMES
# holds one record of each, in this order, and a unit test holds the two to each other.
RUNTIMES: tuple[str, ...] = ("apptainer", "enroot", "podman", "docker", "none")
DEFAULT_RUNTIME = "apptainer"  # what an HPC job uses when --runtime is not given

BY_NAME: Mapping[str, JobKind] = {k.name: k for k in KINDS}
NAMES: tuple[str, ...] = tuple(BY_NAME)
KUBE: tuple[str, ...] = tuple(k.name for k in KINDS if k.kube)
HPC: tuple[str, ...] = tuple(k.name for k in KINDS if not k.kube)


def choices(names: tuple[str, ...] = NAMES) -> str:
    """``a, b or c``: how help text lists the kinds."""
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else "".join(names)


def having(capability: str) -> tuple[str, ...]:
    """The kinds whose record sets ``capability`` (a JobKind field), in KINDS order."""
    return tuple(k.name for k in KINDS if getattr(k, capability))


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
