"""IBM LSF: a bsub script whose `blaunch -u` starts one launcher on each host of
LSB_DJOB_HOSTFILE, which the launcher reads inside the container."""

from __future__ import annotations

from torchpod.contract import RDZV_PORT_DEFAULT, SCHEDULER_VARS

from .record import JobKind

KIND = JobKind("lsf", "lsf", RDZV_PORT_DEFAULT, "lsf", None, None, "bsub <", "bsub", "lsf_script",
               fan_out="blaunch -u", forwards=SCHEDULER_VARS["lsf"], job_id="LSB_JOBID",
               node_file="LSB_DJOB_HOSTFILE", queue=True, batch=True,
               shared_dir=True,
               restarts="none: a non-zero exit ends the job (EXIT); LSF reruns it only from a RERUNNABLE queue",
               piped="bsub",
               submitted=r"Job <(?P<id>[0-9]+)> is submitted",
               watch="bjobs {id}",
               order=120)
