"""manifests/kinds/volcano.py: a worker-only Volcano Job, in a queue, elastic with --nodes MIN:MAX."""

from __future__ import annotations

from torchpod.contract import RDZV_PORT_DEFAULT
from torchpod_toolkit.manifests import jobs
from torchpod_toolkit.manifests.kinds import volcano

from manifest_cases import job_object


def test_its_record_is_the_registered_one():
    assert jobs.kind("volcano") is volcano.KIND and volcano.KIND.port == RDZV_PORT_DEFAULT


def test_it_renders_worker_tasks_in_the_queue_gang_scheduled_on_min_of_max():
    job = job_object("volcano", "2:3", queue="gpu", gpus_per_node=0)
    assert job["kind"] == "Job" and job["spec"]["queue"] == "gpu" and job["spec"]["minAvailable"] == 2
    assert [(t["name"], t["replicas"]) for t in job["spec"]["tasks"]] == [("worker", 3)]
