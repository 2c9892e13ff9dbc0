"""torchpod_toolkit.manifests.models.volcano: what Volcano's admission webhook refuses, the
model refuses. Every Volcano pod planned by the launcher: test_operators.py and
tests/unit/torchpod/schedulers/test_volcano.py."""

from __future__ import annotations

import pytest

from torchpod.errors import InputError
from torchpod_toolkit.manifests import kube, operators
from torchpod_toolkit.manifests.spec import JobSpec, check

from manifest_cases import IMAGE


def test_the_volcano_model_refuses_what_the_admission_webhook_refuses():
    job = kube.objects(check(JobSpec("volcano", "2:3", IMAGE, ("train.py",))))[0]
    job["spec"]["minAvailable"] = 4
    with pytest.raises(InputError, match="minAvailable 4 is above the 3 replicas"):
        operators.pods([job])
    job["spec"]["minAvailable"] = 2
    job["spec"]["tasks"][0]["minAvailable"] = 5
    with pytest.raises(InputError, match="task worker minAvailable 5 is above its 3 replicas"):
        operators.pods([job])
