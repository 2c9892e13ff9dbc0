"""JobSet: one replicated job of one Indexed Job; the launcher builds the endpoint from the
first pod's name with torchpod's own port. Its size is fixed (no MIN:MAX). --mnnvl: the
JobSet CRD carries the claim's current form from kubernetes-sigs/jobset v0.7.0."""

from __future__ import annotations

from torchpod.contract import RDZV_PORT_DEFAULT

from ..operators import JOBSET
from .record import JobKind, Ref

KIND = JobKind("jobset", "jobset", RDZV_PORT_DEFAULT, "jobset", JOBSET,
               "JobSet (kubernetes-sigs/jobset) >= 0.7", "kubectl apply -f", "yaml", Ref("kube", "job_set"),
               mnnvl="JobSet >= 0.7", pod_fields=True, priority_class=True, workdir=True,
               restarts="a failed pod fails its Job (backoffLimit 0) and the JobSet recreates every Job, at most "
                        "{n} times (failurePolicy.maxRestarts), then the JobSet is Failed",
               piped="kubectl apply -f -",
               watch="kubectl -n {namespace} get jobsets.jobset.x-k8s.io {name} -w",
               order=80)
