"""Run:ai's PyTorchJob: the pods training-operator makes (derived from its recordings,
derive.py) and, where the pod template names Run:ai's scheduler, the variables Run:ai adds:
RUNAI_JOB_NAME, RUNAI_JOB_UUID and RUNAI_PROJECT (the ``project`` label) (Run:ai docs,
"Environment Variables inside a Run:ai Workload"). Pure.

This is the one hand-written operator model: no Run:ai scheduler runs in the tests, so its
variables rest on Run:ai's documentation alone. Every other model is derived from what its
real operator did on a real control plane.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from .. import derive
from .common import Obj, Pod, last_wins, uid

# Run:ai pods run under its own scheduler (kube.py renders it, the model reads it back).
RUNAI_SCHEDULER = "runai-scheduler"
TRAINING_OPERATOR = derive.model("kubeflow.org/v1", "PyTorchJob")


def pytorchjob(job: Obj, node_names: Sequence[str] = ()) -> list[Pod]:
    """A PyTorchJob's pods: training-operator's, with Run:ai's variables under its scheduler."""
    pods = TRAINING_OPERATOR(job, node_names)
    name = job["metadata"]["name"]
    out = []
    for pod in pods:
        labels = dict(pod.labels)
        rtype = labels.get("training.kubeflow.org/replica-type", "")
        template = job["spec"]["pytorchReplicaSpecs"].get(rtype.capitalize(), {}).get("template", {})
        if template.get("spec", {}).get("schedulerName") == RUNAI_SCHEDULER:
            env = [*pod.env, ("RUNAI_JOB_NAME", name), ("RUNAI_JOB_UUID", uid(name)),
                   ("RUNAI_PROJECT", labels.get("project", ""))]
            pod = replace(pod, env=last_wins(env))
        out.append(pod)
    return out
