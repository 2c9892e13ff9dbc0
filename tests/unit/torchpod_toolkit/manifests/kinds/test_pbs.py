"""manifests/kinds/pbs.py: a qsub script whose pbsdsh starts one launcher per node file line."""

from __future__ import annotations

from torchpod.contract import SCHEDULER_VARS
from torchpod_toolkit.manifests import jobs
from torchpod_toolkit.manifests.kinds import pbs

from manifest_cases import job_file


def test_it_binds_its_node_file_and_forwards_the_pbs_variables():
    assert jobs.kind("pbs") is pbs.KIND and pbs.KIND.forwards == SCHEDULER_VARS["pbs"]
    text = job_file("pbs", 2, runtime="podman", account="proj-7")
    assert "pbsdsh --" in text and "#PBS -A proj-7" in text
    assert '-v "$PBS_NODEFILE:$PBS_NODEFILE:ro"' in text and "$PBS_NODEFILE, bound into the container" in text
    assert all(f" --env {name} " in text for name in SCHEDULER_VARS["pbs"])
