"""What each operator makes of a rendered manifest: the pods, their names and environment.
Pure: takes the manifest's objects (dicts), returns ``Pod`` values (models/common.py).

One model, used twice: the tests feed every generated manifest through it and hand each
pod's environment to `torchpod plan`; the containers-as-nodes harness (cluster/topology.py)
runs the same pods as containers. Written from the operators' sources, one module per
operator under models/, each citing the project, file and commit it follows:

- models/volcano.py: Volcano's job controller and its env, svc and pytorch plugins, and
  what its admission webhook refuses about minAvailable;
- models/pytorchjob.py: training-operator v1.9's PyTorchJob, and Run:ai's (a PyTorchJob
  under runai-scheduler with the job's RUNAI_* variables);
- models/trainjob.py: Kubeflow Trainer v2's TrainJob on the torch-distributed runtime, and
  what its admission refuses;
- models/leaderworkerset.py: LeaderWorkerSet's two StatefulSets and its pod webhook;
- models/jobset.py: JobSet's controller and Kubernetes' Indexed Job;
- models/common.py: the ``Pod`` record and what Kubernetes itself does (the API server's
  variables, the downward API, the last definition of a variable winning, hostNetwork).

Each model but Run:ai's is held to the real operator's pods on a real control plane:
tests/kube_jobs.py ``assert_model_agrees``, which tests/cluster/test_kube_jobs.py and
tests/cluster/test_kube_volcano.py call after each job, compares the model's pods with the
operator's on the same manifest. No real Run:ai scheduler runs in the tests, so the Run:ai
model stands on its own there.

``MODELS`` maps each job object's apiVersion and kind to its model; ``pods`` finds the one
job object among a manifest's objects and asks its model.
"""

from __future__ import annotations

from typing import Sequence

from torchpod.errors import InputError

from .models.common import Obj, Pod
from .models.jobset import jobset
from .models.leaderworkerset import leaderworkerset
from .models.pytorchjob import pytorchjob
from .models.trainjob import trainjob
from .models.volcano import volcano

MODELS = {
    ("batch.volcano.sh/v1alpha1", "Job"): volcano,
    ("kubeflow.org/v1", "PyTorchJob"): pytorchjob,
    ("trainer.kubeflow.org/v1alpha1", "TrainJob"): trainjob,
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"): leaderworkerset,
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): jobset,
}


def job_object(docs: Sequence[Obj]) -> Obj:
    """The one training job among a manifest's objects (Services and an etcd Pod may sit beside it)."""
    jobs = [d for d in docs if d and (d.get("apiVersion"), d.get("kind")) in MODELS]
    if len(jobs) != 1:
        kinds = ", ".join(f"{d.get('kind')}" for d in docs if d)
        raise InputError("expected exactly one Volcano Job, PyTorchJob, TrainJob, LeaderWorkerSet or JobSet in "
                         f"the manifest; found {kinds or 'nothing'}")
    return jobs[0]


def pods(docs: Sequence[Obj], node_names: Sequence[str] = ()) -> list[Pod]:
    """The pods the operator creates for the manifest's job, in node order."""
    job = job_object(docs)
    return MODELS[(job["apiVersion"], job["kind"])](job, node_names)
