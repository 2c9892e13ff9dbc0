"""manifests/kinds/kubeflow.py: a PyTorchJob of Master and Workers."""

from __future__ import annotations

from torchpod_toolkit.manifests import jobs
from torchpod_toolkit.manifests.kinds import kubeflow

from manifest_cases import job_object


def test_it_renders_a_master_and_workers_with_the_pods_fields():
    assert jobs.kind("kubeflow") is kubeflow.KIND and kubeflow.KIND.mnnvl
    job = job_object("kubeflow", 3, priority_class="training-high")
    replicas = job["spec"]["pytorchReplicaSpecs"]
    assert job["kind"] == "PyTorchJob" and {k: v["replicas"] for k, v in replicas.items()} == {"Master": 1, "Worker": 2}
    assert replicas["Worker"]["template"]["spec"]["priorityClassName"] == "training-high"
