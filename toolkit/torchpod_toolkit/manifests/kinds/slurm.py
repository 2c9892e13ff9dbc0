"""Slurm: an sbatch script whose srun step starts one launcher per node. srun's task
environment is what the launcher reads (SCHEDULER_VARS["slurm"]); the step's GPUs are named
by global id in SLURM_STEP_GPUS (srun(1)). The only kind with --qos, --constraint,
--reservation and --requeue-lead (sbatch --signal and --requeue)."""

from __future__ import annotations

from torchpod.contract import RDZV_PORT_DEFAULT, SCHEDULER_VARS

from .record import JobKind, NameRule, Nodes, Ref

# Slurm stores a job name of any characters up to 1024 (SchedMD/slurm, src/slurmctld/job_mgr.c
# _test_job_desc_fields: _test_strlen(name, "name", 1024)); the name also names the job's files
# (NAME.slurm.sbatch, %x-%j.out, the image file), so torchpod takes the characters a file name
# and a directive line carry as they are, 200 at most.
JOB_NAME = NameRule(r"[A-Za-z0-9][A-Za-z0-9_.+-]*", 200,
                    "a letter or digit, then letters, digits, '_', '.', '+', '-'")

# What `srun --ntasks-per-node=1` hands each task (Slurm srun(1), OUTPUT ENVIRONMENT VARIABLES):
# the node list in its compressed form, the node's index, the step's variables.
NODES = Nodes("{name}-c{n:02d}", (
    ("SLURM_JOB_ID", "{jobid}"), ("SLURM_JOBID", "{jobid}"), ("SLURM_JOB_NAME", "{name}"),
    ("SLURM_JOB_NODELIST", "{hostlist}"), ("SLURM_NODELIST", "{hostlist}"),
    ("SLURM_JOB_NUM_NODES", "{nodes}"), ("SLURM_NNODES", "{nodes}"),
    ("SLURM_STEP_ID", "0"), ("SLURM_STEPID", "0"),
    ("SLURM_STEP_NODELIST", "{hostlist}"), ("SLURM_STEP_NUM_NODES", "{nodes}"),
    ("SLURM_STEP_NUM_TASKS", "{nodes}"), ("SLURM_STEP_TASKS_PER_NODE", "1(x{nodes})"),
    ("SLURM_TASKS_PER_NODE", "1(x{nodes})"), ("SLURM_NODEID", "{i}"),
    ("SLURM_PROCID", "{i}"), ("SLURM_LOCALID", "0"), ("SLURMD_NODENAME", "{host}"),
))

KIND = JobKind("slurm", "slurm", RDZV_PORT_DEFAULT, "slurm", None, None, "sbatch", "sbatch", Ref("hpc", "slurm_script"),
               forwards=SCHEDULER_VARS["slurm"], job_id="SLURM_JOB_ID", nodes=NODES, step_gpus=True,
               queue=True, queue_list=True, job_name=JOB_NAME, gpu_model=True, batch=True, qos=True, requeue=True,
               shared_dir=True, real_batch_system=True,
               rank_domains="the switch path of Slurm's topology/tree plugin, where the site runs it",
               restarts="none: a non-zero exit ends the job FAILED; Slurm requeues a batch job after a node "
                        "failure where the site's JobRequeue allows it",
               piped="sbatch",
               submitted=r"Submitted batch job (?P<id>[0-9]+)",
               watch="squeue -j {id}",
               order=90)
