"""IBM LSF: a bsub script whose `blaunch -u` starts one launcher on each host of
LSB_DJOB_HOSTFILE, which the launcher reads inside the container."""

from __future__ import annotations

from torchpod.contract import RDZV_PORT_DEFAULT, SCHEDULER_VARS

from .record import JobKind, NameRule, Nodes, Ref

# bsub -J takes up to 4094 characters, but '[...]' makes a job array and '%' its slot limit
# (IBM Spectrum LSF 10.1, bsub -J); an array's name is held to letters, digits, '.', '-',
# '_' (LSF admin guide, Job arrays). torchpod takes that set, 200 at most (it names files).
JOB_NAME = NameRule(r"[A-Za-z0-9][A-Za-z0-9_.-]*", 200, "a letter or digit, then letters, digits, '_', '.', '-'")

# What the job `-n N -R "span[ptile=1]"` hands each host (IBM LSF 10.1, "Environment variables
# set for job execution"): one slot per host, so LSB_DJOB_HOSTFILE (under the job's .lsbatch
# directory) lists each host once; no variable says which host this is.
NODES = Nodes("{name}-gpu{n:02d}", (
    ("LSB_JOBID", "{jobid}"), ("LSB_JOBNAME", "{name}"), ("LSB_QUEUE", "normal"),
    ("LSB_HOSTS", "{hosts}"), ("LSB_MCPU_HOSTS", "{mcpu}"),
    ("LSB_DJOB_HOSTFILE", "{node_file}"), ("LSB_DJOB_NUMPROC", "{nodes}"), ("LS_SUBCWD", "/workspace"),
), node_file="/home/lsfuser/.lsbatch/{jobid}.hostfile")

KIND = JobKind("lsf", "lsf", RDZV_PORT_DEFAULT, "lsf", None, None, "bsub <", "bsub", Ref("hpc", "lsf_script"),
               fan_out="blaunch -u", forwards=SCHEDULER_VARS["lsf"], job_id="LSB_JOBID", nodes=NODES,
               node_file="LSB_DJOB_HOSTFILE", queue=True, queue_list=True, job_name=JOB_NAME, gpu_model=True,
               batch=True, shared_dir=True,
               restarts="none: a non-zero exit ends the job (EXIT); LSF reruns it only from a RERUNNABLE queue",
               piped="bsub",
               submitted=r"Job <(?P<id>[0-9]+)> is submitted",
               watch="bjobs {id}",
               order=120)
