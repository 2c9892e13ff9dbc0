"""manifests/kinds/skypilot.py: a SkyPilot task that runs the image itself, with no queue or wall time."""

from __future__ import annotations

import pytest
import yaml

from torchpod.errors import InputError
from torchpod_toolkit.manifests import jobs
from torchpod_toolkit.manifests.kinds import skypilot

from manifest_cases import IMAGE, job_file


def test_it_renders_a_task_on_the_image():
    assert jobs.kind("skypilot") is skypilot.KIND and skypilot.KIND.runtimes == ("none",)
    task = yaml.safe_load(job_file("skypilot", 2))
    assert task["num_nodes"] == 2 and task["resources"]["image_id"] == "docker:" + IMAGE


@pytest.mark.parametrize("fields", [{"queue": "gpu"}, {"walltime": "02:00:00"}])
def test_it_has_no_queue_and_no_wall_time(fields):
    with pytest.raises(InputError, match="a skypilot job has no place for it"):
        job_file("skypilot", 2, **fields)
