"""LeaderWorkerSet: one group of --nodes pods; the launcher builds the endpoint from the
leader's name with torchpod's own port. Its group size is fixed (no MIN:MAX). --mnnvl: the
LeaderWorkerSet CRD carries the claim's current form from kubernetes-sigs/lws v0.4.0."""

from __future__ import annotations

from torchpod.contract import RDZV_PORT_DEFAULT

from ..operators import LEADERWORKERSET
from .record import JobKind, Ref

KIND = JobKind("lws", "lws", RDZV_PORT_DEFAULT, "lws", LEADERWORKERSET,
               "LeaderWorkerSet (kubernetes-sigs/lws) >= 0.6 on Kubernetes >= 1.27", "kubectl apply -f", "yaml",
               Ref("kube", "leader_worker_set"), mnnvl="LeaderWorkerSet >= 0.4", pod_fields=True, priority_class=True,
               workdir=True,
               restarts="without bound: the group is recreated whenever a pod restarts "
                        "(RecreateGroupOnPodRestart) and a LeaderWorkerSet has no failed state; render a JobSet "
                        "(-s jobset) for a job that must end",
               piped="kubectl apply -f -",
               watch="kubectl -n {namespace} get leaderworkersets.leaderworkerset.x-k8s.io {name} -w",
               order=70)
