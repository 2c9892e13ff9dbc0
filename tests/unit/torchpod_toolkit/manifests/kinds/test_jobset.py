"""manifests/kinds/jobset.py: a JobSet of one Indexed Job running every node at once."""

from __future__ import annotations

from torchpod_toolkit.manifests import jobs
from torchpod_toolkit.manifests.kinds import jobset

from manifest_cases import job_file, job_object


def test_it_renders_one_indexed_job_and_claims_the_channel_with_mnnvl():
    assert jobs.kind("jobset") is jobset.KIND
    job = job_object("jobset", 3)["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert job["completionMode"] == "Indexed" and job["parallelism"] == job["completions"] == 3
    assert jobset.KIND.mnnvl in job_file("jobset", 2, mnnvl=True, gpus_per_node=4)
