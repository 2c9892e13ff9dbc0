"""PBS Pro with Cray PALS: `mpiexec --ppn 1` starts one launcher per node and copies the job
script's environment; PALS_NODEID gives the node index."""

from __future__ import annotations

from torchpod.contract import RDZV_PORT_DEFAULT, SCHEDULER_VARS

from .pbs import JOB_NAME
from .record import JobKind

KIND = JobKind("pbs-pals", "pbs", RDZV_PORT_DEFAULT, "pbs-pals", None, None, "qsub", "sh", "pbs_script",
               fan_out="Cray PALS mpiexec", forwards=SCHEDULER_VARS["pbs"], job_id="PBS_JOBID",
               node_file="PBS_NODEFILE", queue=True, job_name=JOB_NAME, batch=True,
               pals=True, shared_dir=True,
               restarts="none: a non-zero exit ends the job; PBS reruns a rerunnable job (qsub's default, -r y) "
                        "after a node failure",
               piped="qsub",
               submitted=r"^(?P<id>[0-9]+(\.[A-Za-z0-9_.-]+)?)$",
               watch="qstat {id}",
               order=110)
