"""The detectors that claim an environment by its variables, in the order they are tried.

Standalone, the fallback when none of these claims the environment, is not among them:
it reads this tuple (to refuse the markers of a multi-node job none of them claimed, and
to name them in that message), and the package appends it last (schedulers.SCHEDULERS).
Adding a scheduler is one module plus one line here.
"""

from __future__ import annotations

from . import (
    azureml,
    explicit,
    flux,
    jobset,
    kubeflow,
    lsf,
    lws,
    mpi,
    pbs,
    runai,
    sagemaker,
    skypilot,
    slurm,
    volcano,
)
from . import env as envconv
from .protocol import Detector

# Order matters; the first module that claims the environment wins.
# - runai, volcano: their markers (RUNAI_*, VC_TASK_INDEX / VC_*_HOSTS) are set only by
#   them, and both also set the generic MASTER_ADDR/WORLD_SIZE/RANK that later detectors
#   would read with other meanings (pods vs processes).
# - lws, azureml: LWS_* and AZUREML_* are theirs alone; AzureML also sets MASTER_ADDR/WORLD_SIZE (processes).
# - sagemaker: SM_HOSTS/SM_CURRENT_HOST are SageMaker's alone and name every host.
# - skypilot, flux: they start tasks inside Slurm/LSF allocations (and Kubernetes) whose
#   variables the task inherits; they are the innermost scheduler, so they come before them.
# - lsf: like slurm and pbs below; jsrun also sets OMPI_*/PMIX_*, so before mpi.
# - slurm, pbs: an allocation's host list is the fullest truth on an HPC node; users also
#   run mpirun or export PET_* inside allocations, so these come before kubeflow and mpi.
# - kubeflow: the PET_* job variables the training-operator and Trainer set in a pod.
# - jobset: after kubeflow, since Trainer v2 pods are JobSet pods too (JOB_COMPLETION_INDEX).
# - mpi: mpirun nests inside every allocation above, so it is the answer only alone.
# - env: MASTER_ADDR + WORLD_SIZE + RANK with no marker of its own (the env:// convention
#   of Run:ai's docs, PAI-DLC, AIHC, training-operator < 1.7); after mpi, whose
#   `mpirun -x MASTER_ADDR` also sets MASTER_ADDR.
# - explicit: torchrun flags on the command line describe the job, nothing else does.
# Two STRONG modules claiming at once (e.g. SLURM_JOB_ID and PBS_JOBID) is an error.
DETECTORS: tuple[Detector, ...] = (
    runai, volcano, lws, azureml, sagemaker, skypilot, flux, slurm, pbs, lsf, kubeflow, jobset, mpi, envconv,
    explicit,
)

__all__ = ["DETECTORS"]
