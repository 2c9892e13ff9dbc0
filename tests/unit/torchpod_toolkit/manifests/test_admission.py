"""torchpod_toolkit.manifests.admission: what Trainer's and Volcano's admission refuse is
refused before a model makes a pod (operators.pods)."""

from __future__ import annotations

import re

import pytest

from torchpod.errors import InputError
from torchpod_toolkit.manifests import kube, operators
from torchpod_toolkit.manifests.admission import trainer_admitted
from torchpod_toolkit.manifests.spec import JobSpec, check

from manifest_cases import IMAGE


@pytest.mark.parametrize("name, trainer, needle", [
    ("Train", {}, "DNS-1035 label"),
    ("t" * 64, {}, "at most 63"),
    ("t" * 45, {"numNodes": 100_000}, "longest pod name"),
    ("train", {"env": [{"name": "PET_NNODES", "value": "9"}]}, "trainer.env sets PET_NNODES"),
])
def test_what_trainers_admission_refuses_is_refused(name, trainer, needle):
    with pytest.raises(InputError, match=re.escape(needle)):
        trainer_admitted(name, trainer)
    trainer_admitted("t" * 44, {"numNodes": 100_000, "env": [{"name": "TORCHPOD_PRESET", "value": "x"}]})


def test_a_trainjob_admission_refuses_makes_no_pod():
    docs = kube.objects(check(JobSpec("trainer", 2, IMAGE, ("t.py",))))
    docs[-1]["spec"]["trainer"]["env"] = [{"name": "PET_NODE_RANK", "value": "0"}]
    with pytest.raises(InputError, match="trainer.env sets PET_NODE_RANK, which the torch plugin sets"):
        operators.pods(docs)


def test_what_volcanos_admission_webhook_refuses_is_refused():
    job = kube.objects(check(JobSpec("volcano", "2:3", IMAGE, ("train.py",))))[0]
    job["spec"]["minAvailable"] = 4
    with pytest.raises(InputError, match="minAvailable 4 is above the 3 replicas"):
        operators.pods([job])
    job["spec"]["minAvailable"] = 2
    job["spec"]["tasks"][0]["minAvailable"] = 5
    with pytest.raises(InputError, match="task worker minAvailable 5 is above its 3 replicas"):
        operators.pods([job])
