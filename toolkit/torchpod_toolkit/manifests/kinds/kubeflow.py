"""Kubeflow training-operator's PyTorchJob, Master and Workers (PET_* variables).
--mnnvl: the PyTorchJob CRD carries the claim's current form from kubeflow/training-operator
v1.9.0 (its CRD at that tag)."""

from __future__ import annotations

from torchpod.contract import PYTORCHJOB_PORT

from ..operators import PYTORCHJOB
from .record import JobKind, Ref

KIND = JobKind("kubeflow", "kubeflow", PYTORCHJOB_PORT, "kubeflow", PYTORCHJOB,
               "Kubeflow training-operator >= 1.7 (PET_* variables)", "kubectl apply -f", "yaml",
               Ref("kube", "pytorch_job_fixed"),
               mnnvl="training-operator >= 1.9", pod_fields=True, priority_class=True, workdir=True,
               restarts="a failed container restarts in place (restartPolicy OnFailure) until the job's pods have "
                        "restarted {n} times in all (runPolicy.backoffLimit), then the PyTorchJob is Failed",
               piped="kubectl apply -f -",
               watch="kubectl -n {namespace} get pytorchjobs.kubeflow.org {name} -w",
               order=30)
