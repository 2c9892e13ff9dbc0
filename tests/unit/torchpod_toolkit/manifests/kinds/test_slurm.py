"""manifests/kinds/slurm.py: an sbatch script that forwards the Slurm detector's variables."""

from __future__ import annotations

from torchpod.contract import SCHEDULER_VARS
from torchpod_toolkit.manifests import jobs
from torchpod_toolkit.manifests.kinds import slurm

from manifest_cases import job_file


def test_it_forwards_what_the_detector_reads_and_takes_slurms_own_options():
    assert jobs.kind("slurm") is slurm.KIND and slurm.KIND.forwards == SCHEDULER_VARS["slurm"]
    text = job_file("slurm", 2, runtime="podman", qos="high", requeue_lead=300)
    assert "#SBATCH --qos=high" in text and "#SBATCH --signal=B:USR1@300" in text
    assert all(f" --env {name} " in text for name in SCHEDULER_VARS["slurm"])


def test_its_job_id_and_step_gpus_reach_the_runtimes():
    assert '"$SQSH.part-$SLURM_JOB_ID"' in job_file("slurm", 2, runtime="enroot")  # the import's temporary file
    assert "SLURM_STEP_GPUS" in job_file("slurm", 2, runtime="docker", gpus_per_node=4)
