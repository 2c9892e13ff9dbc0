"""manifests/kinds/lws.py: a LeaderWorkerSet of one group of --nodes pods."""

from __future__ import annotations

from torchpod_toolkit.manifests import jobs
from torchpod_toolkit.manifests.kinds import lws

from manifest_cases import job_object


def test_it_renders_one_group_of_every_node():
    assert jobs.kind("lws") is lws.KIND and not lws.KIND.node_range
    job = job_object("lws", 3, workdir="/code")
    template = job["spec"]["leaderWorkerTemplate"]
    assert job["kind"] == "LeaderWorkerSet" and template["size"] == 3
    assert template["workerTemplate"]["spec"]["containers"][0]["workingDir"] == "/code"
