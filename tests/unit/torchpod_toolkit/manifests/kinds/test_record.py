"""manifests/kinds/record.py: a job kind's record, frozen; a kind with an operator model is
a Kubernetes kind."""

from __future__ import annotations

import dataclasses

import pytest

from torchpod_toolkit.manifests.kinds.record import JobKind, Ref
from torchpod_toolkit.manifests.operators import JOBSET


def test_a_record_is_frozen_and_kube_means_an_operator_model():
    batch = JobKind("b", "slurm", 1, "slurm", None, None, "sbatch", "sbatch", Ref("hpc", "slurm_script"))
    pods = JobKind("k", "jobset", 1, "jobset", JOBSET, "JobSet", "kubectl apply -f", "yaml",
                   Ref("kube", "job_set"))
    assert not batch.kube and pods.kube
    assert not (batch.node_range or batch.queue or batch.pod_fields) and batch.mnnvl is None  # takes nothing by default
    with pytest.raises(dataclasses.FrozenInstanceError):
        batch.name = "other"  # type: ignore[misc]
