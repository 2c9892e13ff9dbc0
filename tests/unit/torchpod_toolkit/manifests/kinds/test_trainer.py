"""manifests/kinds/trainer.py: a TrainJob, whose runtimePatches take no priority class, workdir or claim."""

from __future__ import annotations

import pytest

from torchpod.contract import TRAINER_PORT
from torchpod.errors import InputError
from torchpod_toolkit.manifests import jobs
from torchpod_toolkit.manifests.kinds import trainer

from manifest_cases import job_file, job_object


def test_it_renders_a_trainjob_on_the_torch_distributed_runtime():
    assert jobs.kind("trainer") is trainer.KIND and trainer.KIND.port == TRAINER_PORT
    job = job_object("trainer", 2)
    assert job["kind"] == "TrainJob" and job["spec"]["runtimeRef"]["name"] == "torch-distributed"


@pytest.mark.parametrize("fields, refusal", [({"priority_class": "high"}, "--priority-class=high: a trainer job"),
                                             ({"workdir": "/code"}, "--workdir=/code: a trainer job"),
                                             ({"mnnvl": True, "gpus_per_node": 4}, "a TrainJob cannot give")])
def test_what_a_trainjob_cannot_say_is_refused(fields, refusal):
    with pytest.raises(InputError, match=refusal):
        job_file("trainer", 2, **fields)
