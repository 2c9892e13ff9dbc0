"""Volcano with a master task and the pytorch job plugin, which opens PYTORCHJOB_PORT.
A fixed size (no MIN:MAX); --mnnvl as for the worker-only Job (kinds/volcano.py)."""

from __future__ import annotations

from torchpod.contract import PYTORCHJOB_PORT

from ..operators import VOLCANO
from .record import JobKind, Ref

KIND = JobKind("volcano-master", "volcano", PYTORCHJOB_PORT, "volcano-master", VOLCANO,
               "Volcano >= 1.9 (its env, svc and pytorch job plugins)", "kubectl apply -f", "yaml",
               Ref("kube", "volcano_job"),
               mnnvl="Volcano >= 1.11", queue=True, pod_fields=True, priority_class=True, workdir=True,
               master_task=True,
               restarts="a failed or evicted pod restarts the whole gang (RestartJob; its pods restart Never, so "
                        "that Volcano sees the failure), at most {n} times (maxRetry), then the Job is Failed",
               piped="kubectl apply -f -",
               watch="kubectl -n {namespace} get jobs.batch.volcano.sh {name} -w",
               order=20)
