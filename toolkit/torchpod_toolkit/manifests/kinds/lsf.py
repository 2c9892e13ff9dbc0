"""IBM LSF: a bsub script whose `blaunch -u` starts one launcher on each host of
LSB_DJOB_HOSTFILE, which the launcher reads inside the container."""

from __future__ import annotations

from torchpod.contract import RDZV_PORT_DEFAULT, SCHEDULER_VARS

from .record import JobKind, NameRule

# bsub -J takes up to 4094 characters, but '[...]' makes a job array and '%' its slot limit
# (IBM Spectrum LSF 10.1, bsub -J); an array's name is held to letters, digits, '.', '-',
# '_' (LSF admin guide, Job arrays). torchpod takes that set, 200 at most (it names files).
JOB_NAME = NameRule(r"[A-Za-z0-9][A-Za-z0-9_.-]*", 200, "a letter or digit, then letters, digits, '_', '.', '-'")

KIND = JobKind("lsf", "lsf", RDZV_PORT_DEFAULT, "lsf", None, None, "bsub <", "bsub", "lsf_script",
               fan_out="blaunch -u", forwards=SCHEDULER_VARS["lsf"], job_id="LSB_JOBID",
               node_file="LSB_DJOB_HOSTFILE", queue=True, queue_list=True, job_name=JOB_NAME, gpu_model=True,
               batch=True, shared_dir=True,
               restarts="none: a non-zero exit ends the job (EXIT); LSF reruns it only from a RERUNNABLE queue",
               piped="bsub",
               submitted=r"Job <(?P<id>[0-9]+)> is submitted",
               watch="bjobs {id}",
               order=120)
