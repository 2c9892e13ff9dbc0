"""torchpod_toolkit.kube.kubelet, what it writes before a container runs: the Node as a
kubelet registers it (well-known labels, GPU and RDMA capacity taken from torchpod's
manifests), its status and Lease, and node names checked as DNS labels."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from torchpod_toolkit.kube import kubelet, plane, planecerts
from torchpod_toolkit.manifests.spec import GPU_RESOURCE


def test_the_rdma_resources_are_those_the_manifests_name():
    names = kubelet.rdma_resources()
    assert names and all(n.startswith("rdma/") for n in names)


def test_a_node_advertises_gpus_rdma_cpu_memory_and_pods():
    capacity = kubelet.NodeShape(gpus=4).capacity()
    assert capacity[GPU_RESOURCE] == "4" and capacity["pods"] == "110" and capacity["cpu"] == "16"
    assert all(capacity[n] == "1" for n in kubelet.rdma_resources())


def test_node_object_status_and_lease():
    node = kubelet.node_object("n-0")
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "n-0"
    assert node["metadata"]["labels"]["kubernetes.io/arch"] == "amd64"
    status = kubelet.node_status(kubelet.NodeShape(), "172.18.0.1", "n-0", "v1.37.2", "T")
    ready = [c for c in status["conditions"] if c["type"] == "Ready"]
    assert ready[0]["status"] == "True" and ready[0]["reason"] == "KubeletReady"
    assert status["addresses"][0] == {"type": "InternalIP", "address": "172.18.0.1"}
    lease = kubelet.lease_object("n-0", "uid-1", "T")
    assert lease["metadata"]["namespace"] == "kube-node-lease" and lease["spec"]["holderIdentity"] == "n-0"
    owner = {"apiVersion": "v1", "kind": "Node", "name": "n-0", "uid": "uid-1"}
    assert lease["metadata"]["ownerReferences"][0] == owner


def test_a_nodes_own_labels_sit_beside_the_well_known_ones_which_they_cannot_replace():
    node = kubelet.node_object("n-0", {"cloud.example.com/block": "b", "kubernetes.io/hostname": "other"})
    labels = node["metadata"]["labels"]
    assert labels["cloud.example.com/block"] == "b" and labels["kubernetes.io/hostname"] == "n-0"
    with pytest.raises(ValueError, match=r"node_labels names \['n-9'\], which are not among the nodes"):
        kubelet.Kubelet(object(), object(), nodes=2, prefix="n", node_labels={"n-9": {"a": "b"}})


def test_times_as_the_api_writes_them():
    moment = datetime.datetime(2026, 11, 27, 4, 5, 6, 789, tzinfo=datetime.timezone.utc)
    assert kubelet.now_text(moment) == "2026-11-27T04:05:06Z"
    assert kubelet.now_text(moment, micro=True) == "2026-11-27T04:05:06.000789Z"


@pytest.mark.parametrize("prefix, count", [("Upper", 1), ("under_score", 1), ("x" * 70, 1), ("ok", 0), ("-lead", 1)])
def test_node_names_must_be_dns_labels(prefix, count):
    fake = plane.Plane(root=Path("/nonexistent"), ports=plane.Ports(1, 2, 3, 4, 5), pids={}, binaries={}, seconds=0)
    with pytest.raises(ValueError, match="DNS labels"):
        kubelet.Kubelet(fake, object(), nodes=count, prefix=prefix)


def test_a_nodes_certificate_names_it_in_system_nodes(tmp_path):
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    planecerts.make_pki(tmp_path, datetime.datetime.now(datetime.timezone.utc))
    cert = x509.load_pem_x509_certificate(
        planecerts.issue_client(tmp_path, "node-n-0", "system:node:n-0", "system:nodes").read_bytes())
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "system:node:n-0"
    assert cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:nodes"
