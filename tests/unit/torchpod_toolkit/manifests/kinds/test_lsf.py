"""manifests/kinds/lsf.py: a bsub script whose blaunch starts one launcher on each listed host."""

from __future__ import annotations

from torchpod.contract import SCHEDULER_VARS
from torchpod_toolkit.manifests import jobs
from torchpod_toolkit.manifests.kinds import lsf

from manifest_cases import job_file


def test_it_binds_its_host_file_and_names_its_job_id():
    assert jobs.kind("lsf") is lsf.KIND and lsf.KIND.forwards == SCHEDULER_VARS["lsf"]
    text = job_file("lsf", 2, runtime="docker", walltime="00:30:00")
    assert 'blaunch -u "$LSB_DJOB_HOSTFILE" -no-shell' in text and "#BSUB -W 0:30" in text
    assert '-v "$LSB_DJOB_HOSTFILE:$LSB_DJOB_HOSTFILE:ro"' in text and '"$LSB_JOBID"' in text
