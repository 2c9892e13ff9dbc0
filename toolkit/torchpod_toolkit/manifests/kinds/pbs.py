"""PBS Pro without PALS: pbsdsh starts one launcher per line of PBS_NODEFILE (one line per
node: mpiprocs=1), which the launcher reads inside the container."""

from __future__ import annotations

from torchpod.contract import RDZV_PORT_DEFAULT, SCHEDULER_VARS

from .record import JobKind, NameRule, Nodes, Ref

# OpenPBS's check_job_name (openpbs/openpbs cd7ab5e, src/lib/Libcmds/ck_job_name.c): at most
# PBS_MAXJOBNAME (230) characters, each alphanumeric or one of '-', '_', '+', '.'; a first
# digit is allowed for a job (src/lib/Libecl/ecl_verify_values.c). torchpod starts it with a
# letter or digit (it also names files) and holds it to 200.
JOB_NAME = NameRule(r"[A-Za-z0-9][A-Za-z0-9_.+-]*", 200,
                    "a letter or digit, then letters, digits, '_', '.', '+', '-'")

# What every node of a PBS job has: PBS_NODEFILE with one line per mpiprocs slot, in FQDN
# form (hosts report their short name), and PBS_JOBID naming the job.
JOB_ENV = (("PBS_JOBID", "{jobid}"), ("PBS_JOBNAME", "{name}"), ("PBS_QUEUE", "workq"),
           ("PBS_ENVIRONMENT", "PBS_BATCH"), ("PBS_O_WORKDIR", "/workspace"), ("PBS_NODEFILE", "{node_file}"))
# ... and each pbsdsh task its node's number (openpbs src/resmom/start_exec.c)
NODES = Nodes("{name}-n{n:02d}.hpc.local", JOB_ENV + (("PBS_NODENUM", "{i}"), ("PBS_TASKNUM", "{n:08X}")),
              short_hostname=True, job_id="{number}.pbs01", node_file="/var/spool/pbs/aux/{jobid}", per_slot=True)

KIND = JobKind("pbs", "pbs", RDZV_PORT_DEFAULT, "pbs", None, None, "qsub", "sh",
               Ref("hpc", "pbs_script"), fan_out="pbsdsh",
               forwards=SCHEDULER_VARS["pbs"], job_id="PBS_JOBID", node_file="PBS_NODEFILE", nodes=NODES, queue=True,
               job_name=JOB_NAME, batch=True, shared_dir=True, shared_writes="pbsdsh's task statuses",
               restarts="none: a non-zero exit ends the job; PBS reruns a rerunnable job (qsub's default, -r y) "
                        "after a node failure",
               piped="qsub",
               submitted=r"^(?P<id>[0-9]+(\.[A-Za-z0-9_.-]+)?)$",
               watch="qstat {id}",
               order=100)
