"""torchpod_toolkit.manifests.models.trainjob: the torch plugin's process count per node, what
Trainer's admission refuses, and a CPU TrainJob's pods."""

from __future__ import annotations

import re

import pytest

from torchpod.errors import InputError
from torchpod_toolkit.manifests import kube, operators
from torchpod_toolkit.manifests.models.trainjob import trainer_admitted, trainer_nproc
from torchpod_toolkit.manifests.spec import JobSpec, check

from manifest_cases import IMAGE


# --- Trainer (v2.3.0's torch plugin and admission; v2.4.0 changes neither) -----------------
@pytest.mark.parametrize("trainer, nproc", [
    ({"numProcPerNode": 4}, "4"),
    ({"numProcPerNode": 4, "resourcesPerNode": {"limits": {"cpu": "64"}}}, "4"),  # given wins
    ({"resourcesPerNode": {"limits": {"nvidia.com/gpu": "4"}}}, "auto"),  # torchrun counts the GPUs
    ({"resourcesPerNode": {"requests": {"nvidia.com/gpu": 0}, "limits": {"nvidia.com/gpu": 2}}}, "auto"),
    ({"resourcesPerNode": {"requests": {"cpu": "3"}, "limits": {"cpu": "8"}}}, "3"),  # requests first
    ({"resourcesPerNode": {"limits": {"cpu": "2500m"}}}, "3"),  # Quantity.Value() rounds up
    ({"resourcesPerNode": {"requests": {"cpu": "0.5"}}}, "1"),
    ({"resourcesPerNode": {"requests": {"memory": "8Gi"}}}, "1"),  # no GPU, no CPU: at least 1
    ({}, "1"),
])
def test_the_torch_plugins_process_count(trainer, nproc):
    assert trainer_nproc(trainer) == nproc


@pytest.mark.parametrize("trainer, needle", [
    ({"numProcPerNode": "auto"}, "trainer.numProcPerNode 'auto'"),  # an int32 since v2.2
    ({"numProcPerNode": 0}, "expected a whole number >= 1"),
    ({"numProcPerNode": True}, "numProcPerNode True"),
    ({"resourcesPerNode": {"limits": {"cpu": "2k"}}}, "quantity '2k' is not modelled"),
    ({"resourcesPerNode": {"limits": {"cpu": "1\n"}}}, "is not modelled"),
])
def test_a_process_count_the_torch_plugin_would_not_take_is_refused(trainer, needle):
    with pytest.raises(InputError, match=re.escape(needle)):
        trainer_nproc(trainer)


@pytest.mark.parametrize("name, trainer, needle", [
    ("Train", {}, "DNS-1035 label"),
    ("t" * 64, {}, "at most 63"),
    ("t" * 45, {"numNodes": 100_000}, "longest pod name"),
    ("train", {"env": [{"name": "PET_NNODES", "value": "9"}]}, "trainer.env sets PET_NNODES"),
])
def test_what_trainers_admission_refuses_the_model_refuses(name, trainer, needle):
    with pytest.raises(InputError, match=re.escape(needle)):
        trainer_admitted(name, trainer)
    trainer_admitted("t" * 44, {"numNodes": 100_000, "env": [{"name": "TORCHPOD_PRESET", "value": "x"}]})


def test_a_cpu_trainjob_runs_one_process_per_node():
    docs = kube.objects(check(JobSpec("trainer", 2, IMAGE, ("t.py",), gpus_per_node=0)))
    assert {p.env_dict["PET_NPROC_PER_NODE"] for p in operators.pods(docs)} == {"1"}
