"""manifests/kinds/volcano_master.py: a Volcano Job with a master task and the pytorch plugin's port."""

from __future__ import annotations

import pytest

from torchpod.contract import PYTORCHJOB_PORT
from torchpod.errors import InputError
from torchpod_toolkit.manifests import jobs
from torchpod_toolkit.manifests.kinds import volcano_master

from manifest_cases import job_file, job_object


def test_it_renders_a_master_and_workers_with_the_pytorch_plugin():
    assert jobs.kind("volcano-master") is volcano_master.KIND
    job = job_object("volcano-master", 3)
    assert [(t["name"], t["replicas"]) for t in job["spec"]["tasks"]] == [("master", 1), ("worker", 2)]
    assert f"--port={PYTORCHJOB_PORT}" in job["spec"]["plugins"]["pytorch"]


def test_its_size_is_fixed():
    with pytest.raises(InputError, match="a volcano-master job has a fixed size"):
        job_file("volcano-master", "2:3")
