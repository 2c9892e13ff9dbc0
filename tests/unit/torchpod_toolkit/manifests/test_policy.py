"""torchpod_toolkit.manifests.policy: every generated manifest is within policy, and the
policy flags what a manifest must not ask for (privilege, capabilities, 'latest', GPU
requests that differ from limits)."""

from __future__ import annotations

import pytest

from torchpod_toolkit.manifests import policy
from torchpod_toolkit.manifests.spec import JobSpec

from manifest_cases import IMAGE, KUBE_SPECS, documents, spec_id


@pytest.mark.parametrize("spec", KUBE_SPECS, ids=spec_id)
def test_every_generated_manifest_is_within_policy(spec):
    assert policy.violations(documents(spec)) == []


def test_policy_flags_what_a_manifest_must_not_ask_for():
    docs = documents(JobSpec("kubeflow", 2, IMAGE, ("t.py",), rdma="hostnetwork", privileged=True))
    assert any("privileged" in v for v in policy.violations(docs))
    assert policy.violations(docs, allow_privileged=True) == []
    c = docs[0]["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    c["securityContext"]["capabilities"]["add"].append("SYS_ADMIN")
    c["image"] = "registry.example.com/torchpod/pytorch:latest"
    c["resources"]["requests"]["nvidia.com/gpu"] = "4"
    found = "\n".join(policy.violations(docs, allow_privileged=True))
    assert "SYS_ADMIN" in found and "'latest'" in found and "nvidia.com/gpu requests 4 but limits 8" in found
