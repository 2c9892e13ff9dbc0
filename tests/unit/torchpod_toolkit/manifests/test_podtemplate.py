"""torchpod_toolkit.manifests.podtemplate: the pod every Kubernetes kind runs its nodes in,
with torchpod named as the command, the Guaranteed QoS class, least privilege and only the
volumes and fields the job asked for."""

from __future__ import annotations

from torchpod_toolkit.manifests import podtemplate
from torchpod_toolkit.manifests.spec import JobSpec, check

IMAGE = "registry.example.com/torchpod/pytorch:2.13.0-cuda13.0"


def _spec(**change) -> JobSpec:
    return check(JobSpec("volcano", 2, IMAGE, ("train.py", "--lr", "0.1"), **change))


def test_the_container_names_torchpod_and_asks_what_it_limits():
    c = podtemplate.container(_spec(gpus_per_node=4))
    assert c["name"] == podtemplate.CONTAINER and c["command"] == podtemplate.LAUNCHER
    assert c["args"] == ["run", "--", "train.py", "--lr", "0.1"]
    assert c["resources"]["requests"] == c["resources"]["limits"] and c["resources"]["limits"]["nvidia.com/gpu"] == "4"
    assert c["ports"] == [{"name": podtemplate.PORT_NAME, "containerPort": _spec().port, "protocol": "TCP"}]


def test_an_etcd_the_operator_names_is_not_named_twice():
    spec = _spec(rdzv="etcd", etcd_endpoint="etcd.example:2379")
    assert podtemplate.launcher_args(spec)[:5] == ["run", "--rdzv-backend", "etcd-v2", "--rdzv-endpoint",
                                                   "etcd.example:2379"]
    assert podtemplate.launcher_args(spec, rdzv_from_operator=True)[:2] == ["run", "--"]


def test_a_pod_without_rdma_runs_restricted_and_one_with_it_adds_ipc_lock_alone():
    assert podtemplate.container_security(_spec()) == {
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True,
        "readOnlyRootFilesystem": True}
    rdma = _spec(rdma="hostnetwork")
    assert podtemplate.container_security(rdma)["capabilities"] == {"add": ["IPC_LOCK"]}
    assert "runAsUser" not in podtemplate.pod_security_context(rdma)
    assert podtemplate.pod_security_context(_spec())["seccompProfile"] == {"type": "RuntimeDefault"}


def test_the_pod_mounts_what_the_job_asked_for_and_a_writable_tmp():
    pod = podtemplate.pod_spec(_spec(rdma="hostnetwork", env=("A=1",)))
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert [v["name"] for v in pod["volumes"]] == ["shm", "tmp", "devinf"]
    assert {"name": "A", "value": "1"} in pod["containers"][0]["env"]


def test_every_pod_claims_the_imex_channel_under_mnnvl():
    spec = check(JobSpec("kubeflow", 2, IMAGE, ("t.py",), gpus_per_node=4, mnnvl=True))
    pod = podtemplate.pod_spec(spec)
    assert pod["resourceClaims"][0]["name"] == podtemplate.MNNVL_CLAIM
    assert pod["containers"][0]["resources"]["claims"] == [{"name": podtemplate.MNNVL_CLAIM}]


def test_site_fields_appear_only_when_given():
    assert podtemplate.site_pod_fields(_spec()) == {}
    fields = podtemplate.site_pod_fields(_spec(service_account="trainer", node_selector=("pool=gpu",)))
    assert fields == {"serviceAccountName": "trainer", "nodeSelector": {"pool": "gpu"}}
