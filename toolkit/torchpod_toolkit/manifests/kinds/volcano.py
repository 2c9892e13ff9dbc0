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

from .. import operators
from .record import JobKind

KIND = JobKind("volcano", "volcano", RDZV_PORT_DEFAULT, "volcano", operators.volcano,
               "Volcano >= 1.9 (its env and svc job plugins)", "kubectl apply -f", "yaml", "volcano_job",
               node_range=True, mnnvl="Volcano >= 1.11", queue=True, pod_fields=True, priority_class=True,
               workdir=True,
               order=10)
