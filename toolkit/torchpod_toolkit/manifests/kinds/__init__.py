"""The job kinds `invoke manifests` renders: one module each, declaring one record (``KIND``,
a record.JobKind). Pure.

``KINDS`` is their order, the order every list of kinds follows (the --scheduler choices,
the help, the messages naming the kinds that take an option): the Kubernetes kinds first,
Volcano's before the operators', then the batch systems, SkyPilot last.
"""

from __future__ import annotations

from . import (
               jobset,
               kubeflow,
               kubeflow_elastic,
               lsf,
               lws,
               pbs,
               pbs_pals,
               runai,
               skypilot,
               slurm,
               trainer,
               volcano,
               volcano_master,
)
from .record import JobKind

KINDS: tuple[JobKind, ...] = tuple(m.KIND for m in (
    volcano, volcano_master, kubeflow, kubeflow_elastic, trainer, runai, lws, jobset,
    slurm, pbs, pbs_pals, lsf, skypilot,
))
