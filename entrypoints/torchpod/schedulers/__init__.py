"""Scheduler detection: one module per scheduler, tried in the order of SCHEDULERS.

Each module has ``NAME``, ``STRONG``, ``claims(env) -> bool`` (a cheap marker check) and
``detect(env, facts) -> Detection`` (raises InputError when the marker is there but the
variables are broken; never falls back to a world of one).
"""

from __future__ import annotations

from types import ModuleType

from ..errors import InputError
from . import explicit, kubeflow, mpi, pbs, runai, slurm, standalone, volcano
from .common import Env

# Order matters; the first module that claims the environment wins.
# - runai, volcano: their markers (RUNAI_JOB_*, VC_TASK_INDEX / VC_*_HOSTS) are set only by
#   them, and both also set the generic MASTER_ADDR/WORLD_SIZE/RANK that other detectors
#   would read with other meanings (pods vs processes).
# - slurm, pbs: an allocation's host list is the fullest truth on an HPC node; users also
#   run mpirun or export PET_* inside allocations, so these come before kubeflow and mpi.
# - kubeflow: PET_* are torchrun's own override variables that people export anywhere;
#   claim them as Kubeflow only in a pod no stronger marker explains.
# - mpi: mpirun nests inside every allocation above, so it is the answer only alone.
# - standalone: nothing found; refuses stray WORLD_SIZE/MASTER_ADDR instead of guessing.
# Two STRONG modules claiming at once (e.g. SLURM_JOB_ID and PBS_JOBID) is an error.
SCHEDULERS: tuple[ModuleType, ...] = (runai, volcano, slurm, pbs, kubeflow, mpi, standalone)

BY_NAME: dict[str, ModuleType] = {m.NAME: m for m in SCHEDULERS + (explicit,)}

_MARKERS = {
    "runai": "RUNAI_JOB_NAME/RUNAI_JOB_UUID",
    "volcano": "VC_TASK_INDEX/VC_<TASK>_HOSTS",
    "slurm": "SLURM_JOB_ID",
    "pbs": "PBS_JOBID/PBS_NODEFILE",
}


def forced(env: Env) -> ModuleType | None:
    """The module TORCHPOD_SCHEDULER names, or None when it is unset."""
    value = (env.get("TORCHPOD_SCHEDULER") or "").strip().lower()
    if not value or value == "auto":
        return None
    if value not in BY_NAME:
        raise InputError(
            f"TORCHPOD_SCHEDULER={env['TORCHPOD_SCHEDULER']!r} is not a known scheduler; "
            f"expected one of {', '.join(sorted(BY_NAME))} or auto; unset it to detect"
        )
    return BY_NAME[value]


def claimed(env: Env) -> ModuleType | None:
    """The first module in SCHEDULERS that claims ``env``, standalone excluded."""
    strong = [m for m in SCHEDULERS if m.STRONG and m.claims(env)]
    if len(strong) > 1:
        a, b = strong[0].NAME, strong[1].NAME
        raise InputError(
            f"conflicting schedulers: {_MARKERS[a]} ({a}) and {_MARKERS[b]} ({b}) are both "
            f"set; expected one; set TORCHPOD_SCHEDULER={a} or {b} to choose"
        )
    for module in SCHEDULERS:
        if module is not standalone and module.claims(env):
            return module
    return None


__all__ = ["SCHEDULERS", "BY_NAME", "forced", "claimed"]
