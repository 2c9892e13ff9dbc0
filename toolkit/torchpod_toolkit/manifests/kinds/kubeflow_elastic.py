"""Kubeflow training-operator's PyTorchJob with an elasticPolicy, worker replicas only.

--nodes MIN:MAX: elasticPolicy minReplicas/maxReplicas, Worker replicas = MAX; the operator
sets PET_NNODES=MIN:MAX (kubeflow/training-operator v1.9.0, pkg/controller.v1/pytorch/
elastic.go generateEnvNnodes). --mnnvl as for kinds/kubeflow.py.
"""

from __future__ import annotations

from torchpod.contract import PYTORCHJOB_PORT

from ..operators import PYTORCHJOB
from .record import JobKind, Ref

KIND = JobKind("kubeflow-elastic", "kubeflow", PYTORCHJOB_PORT, "kubeflow-elastic", PYTORCHJOB,
               "Kubeflow training-operator >= 1.7 (elasticPolicy)", "kubectl apply -f", "yaml",
               Ref("kube", "pytorch_job_elastic"),
               node_range=True, mnnvl="training-operator >= 1.9", pod_fields=True, priority_class=True, workdir=True,
               restarts="torchrun re-forms the group at most {n} times (elasticPolicy.maxRestarts); a failed "
                        "container restarts in place until the pods have restarted {n} times in all "
                        "(runPolicy.backoffLimit), then the PyTorchJob is Failed",
               piped="kubectl apply -f -",
               watch="kubectl -n {namespace} get pytorchjobs.kubeflow.org {name} -w",
               order=40)
