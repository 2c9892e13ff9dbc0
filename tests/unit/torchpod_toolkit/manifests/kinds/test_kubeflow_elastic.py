"""manifests/kinds/kubeflow_elastic.py: a worker-only PyTorchJob whose elasticPolicy carries --nodes MIN:MAX."""

from __future__ import annotations

from torchpod_toolkit.manifests import jobs
from torchpod_toolkit.manifests.kinds import kubeflow_elastic

from manifest_cases import job_object


def test_it_renders_an_elastic_policy_from_min_to_max():
    assert jobs.kind("kubeflow-elastic") is kubeflow_elastic.KIND and kubeflow_elastic.KIND.node_range
    job = job_object("kubeflow-elastic", "2:4", gpus_per_node=0)
    assert job["spec"]["elasticPolicy"]["minReplicas"] == 2 and job["spec"]["elasticPolicy"]["maxReplicas"] == 4
    assert list(job["spec"]["pytorchReplicaSpecs"]) == ["Worker"]
