"""What each operator makes of a rendered manifest: the pods, their names and environment.
Pure but for reading the recordings: takes the manifest's objects (dicts), returns ``Pod``
values (models/common.py).

One model, used twice: the tests feed every generated manifest through it and hand each
pod's environment to `torchpod plan`; the containers-as-nodes harness (cluster/topology.py)
and `invoke demo --manifest` run the same pods as containers. The models are not written
here: each is derived (derive.py) from what the real operator made of each kind's render,
recorded on a real control plane (manifests/recorded/<kind>.json) and recorded afresh and
compared in the cluster tier (tests/kube_records.py):

- Volcano's job controller and its env, svc and pytorch plugins (volcano, volcano-master);
- training-operator's PyTorchJob (kubeflow, kubeflow-elastic), with Run:ai's variables
  (models/runai.py, the one hand-written model: no Run:ai scheduler runs in the tests);
- Kubeflow Trainer v2's TrainJob on the torch-distributed runtime (trainer);
- LeaderWorkerSet's StatefulSets and pod webhook (lws);
- JobSet's controller and Kubernetes' Indexed Job (jobset).

What admission refuses is refused first (admission.py). ``MODELS`` maps each job object's
apiVersion and kind to its model; ``pods`` finds the one job object among a manifest's
objects and asks its model.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from . import admission, derive
from .derive import job_object
from .models.common import Obj, Pod
from .models.runai import pytorchjob

__all__ = ["MODELS", "VOLCANO", "PYTORCHJOB", "TRAINJOB", "LEADERWORKERSET", "JOBSET", "job_object", "pods"]

VOLCANO = derive.model("batch.volcano.sh/v1alpha1", "Job")
PYTORCHJOB = pytorchjob
TRAINJOB = derive.model("trainer.kubeflow.org/v1alpha1", "TrainJob")
LEADERWORKERSET = derive.model("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
JOBSET = derive.model("jobset.x-k8s.io/v1alpha2", "JobSet")
MODELS: Mapping[tuple[str, str], Callable[..., list[Pod]]] = {
    **derive.MODELS, ("kubeflow.org/v1", "PyTorchJob"): PYTORCHJOB}


def pods(docs: Sequence[Obj], node_names: Sequence[str] = ()) -> list[Pod]:
    """The pods the operator creates for the manifest's job, in node order."""
    job = job_object(docs)
    admission.admitted(job)
    return MODELS[(job["apiVersion"], job["kind"])](job, node_names)
