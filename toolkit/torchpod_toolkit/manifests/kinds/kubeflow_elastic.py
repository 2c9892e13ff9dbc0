"""Kubeflow training-operator's PyTorchJob with an elasticPolicy, worker replicas only.

--nodes MIN:MAX: elasticPolicy minReplicas/maxReplicas, Worker replicas = MAX; the operator
sets PET_NNODES=MIN:MAX (kubeflow/training-operator v1.9.0, pkg/controller.v1/pytorch/
elastic.go generateEnvNnodes). --mnnvl as for kinds/kubeflow.py.
"""

from __future__ import annotations

from torchpod.contract import PYTORCHJOB_PORT

from .. import operators
from .record import JobKind

KIND = JobKind("kubeflow-elastic", "kubeflow", PYTORCHJOB_PORT, "kubeflow-elastic", operators.pytorchjob,
               "Kubeflow training-operator >= 1.7 (elasticPolicy)", "kubectl apply -f", "yaml", "pytorch_job_elastic",
               node_range=True, mnnvl="training-operator >= 1.9", pod_fields=True, priority_class=True, workdir=True,
               order=40)
