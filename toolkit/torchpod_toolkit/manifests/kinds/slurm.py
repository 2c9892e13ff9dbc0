"""Slurm: an sbatch script whose srun step starts one launcher per node. srun's task
environment is what the launcher reads (SCHEDULER_VARS["slurm"]); the step's GPUs are named
by global id in SLURM_STEP_GPUS (srun(1)). The only kind with --qos, --constraint,
--reservation and --requeue-lead (sbatch --signal and --requeue)."""

from __future__ import annotations

from torchpod.contract import RDZV_PORT_DEFAULT, SCHEDULER_VARS

from .record import JobKind

KIND = JobKind("slurm", "slurm", RDZV_PORT_DEFAULT, "slurm", None, None, "sbatch", "sbatch", "slurm_script",
               forwards=SCHEDULER_VARS["slurm"], job_id="SLURM_JOB_ID", step_gpus=True,
               queue=True, batch=True, qos=True, requeue=True,
               shared_dir=True, rank_domains="the switch path of Slurm's topology/tree plugin, where the site runs it",
               restarts="none: a non-zero exit ends the job FAILED; Slurm requeues a batch job after a node "
                        "failure where the site's JobRequeue allows it",
               piped="sbatch",
               submitted=r"Submitted batch job (?P<id>[0-9]+)",
               watch="squeue -j {id}",
               order=90)
