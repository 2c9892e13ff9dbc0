"""Volcano, worker tasks only: the launcher builds the endpoint from VC_WORKER_HOSTS with
torchpod's own port.

--nodes MIN:MAX: minAvailable = MIN on the job and on its task, replicas = MAX (volcano-sh/
volcano ed72c7c8, pkg/webhooks/admission/jobs/mutate/mutate_job.go defaults a task's
minAvailable to its replicas), and PET_NNODES=MIN:MAX in the container, which the launcher
reads as torchrun's own spelling of --nnodes (kube.volcano_job).
--mnnvl: Volcano's Job embeds the core PodSpec with resourceClaims and the container's
resources.claims in their current form from v1.11.0 (its CRD at that tag).
"""

from __future__ import annotations

from torchpod.contract import RDZV_PORT_DEFAULT

from ..operators import VOLCANO
from .record import JobKind, Ref

KIND = JobKind("volcano", "volcano", RDZV_PORT_DEFAULT, "volcano", VOLCANO,
               "Volcano >= 1.9 (its env and svc job plugins)", "kubectl apply -f", "yaml", Ref("kube", "volcano_job"),
               node_range=True, mnnvl="Volcano >= 1.11", queue=True, pod_fields=True, priority_class=True,
               workdir=True,
               restarts="a failed or evicted pod restarts the whole gang (RestartJob; its pods restart Never, so "
                        "that Volcano sees the failure), at most {n} times (maxRetry), then the Job is Failed",
               restarts_elastic="torchrun re-forms the group at most {n} times (PET_MAX_RESTARTS) as nodes leave "
                                "or return; a pod whose launcher exits non-zero is not restarted (restartPolicy "
                                "Never) and the others go on while the gang's minimum remain; once every pod has "
                                "ended the Job is Completed if that minimum succeeded, else Failed",
               piped="kubectl apply -f -",
               watch="kubectl -n {namespace} get jobs.batch.volcano.sh {name} -w",
               order=10)
