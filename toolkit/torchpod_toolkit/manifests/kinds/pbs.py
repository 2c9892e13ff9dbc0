"""PBS Pro without PALS: pbsdsh starts one launcher per line of PBS_NODEFILE (one line per
node: mpiprocs=1), which the launcher reads inside the container."""

from __future__ import annotations

from torchpod.contract import RDZV_PORT_DEFAULT, SCHEDULER_VARS

from .record import JobKind

KIND = JobKind("pbs", "pbs", RDZV_PORT_DEFAULT, "pbs", None, None, "qsub", "sh", "pbs_script", fan_out="pbsdsh",
               forwards=SCHEDULER_VARS["pbs"], job_id="PBS_JOBID", node_file="PBS_NODEFILE", queue=True, batch=True,
               shared_dir=True, shared_writes="pbsdsh's task statuses",
               restarts="none: a non-zero exit ends the job; PBS reruns a rerunnable job (qsub's default, -r y) "
                        "after a node failure",
               piped="qsub",
               submitted=r"^(?P<id>[0-9]+(\.[A-Za-z0-9_.-]+)?)$",
               watch="qstat {id}",
               order=100)
