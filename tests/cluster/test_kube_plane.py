"""A real Kubernetes control plane from the programs `invoke kube.build` made (the pinned
release's etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl),
started by torchpod_toolkit.kube.plane (the ``kube`` fixture): kubectl reads its health and
version through the administrator's kubeconfig, Pod Security admission refuses a privileged
pod in a namespace that enforces ``restricted`` and admits a restricted one, the controller
manager gives a new namespace its service account and CA bundle, the scheduler marks a pod
with no node to run on unschedulable, and stopping the plane leaves no process behind.

Without the programs the tests fail under CI (TORCHPOD_REQUIRE_TOOLS=1) and skip elsewhere,
naming `invoke kube.build`."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from kube_helpers import until

PRIVILEGED = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "privileged"},
              "spec": {"containers": [{"name": "c", "image": "registry.invalid/x:1",
                                       "securityContext": {"privileged": True}}]}}
RESTRICTED = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "restricted"},
              "spec": {"securityContext": {"runAsNonRoot": True, "runAsUser": 1000,
                                           "seccompProfile": {"type": "RuntimeDefault"}},
                       "containers": [{"name": "c", "image": "registry.invalid/x:1",
                                       "securityContext": {"allowPrivilegeEscalation": False,
                                                           "capabilities": {"drop": ["ALL"]}}}]}}


def test_kubectl_reads_the_api_servers_health_and_the_pinned_release(kube):
    ready = kube.kubectl("get", "--raw", "/readyz?verbose").stdout
    assert "readyz check passed" in ready and "[+]etcd ok" in ready
    version = json.loads(kube.kubectl("get", "--raw", "/version").stdout)
    assert version["gitVersion"] == kube.plan.kubernetes
    assert kube.kubectl("auth", "whoami", "-o", "json").returncode == 0


def test_the_controller_manager_gives_a_namespace_its_service_account_and_ca(kube):
    kube.namespace("ctrl")
    until("the kube-root-ca.crt ConfigMap",
          lambda: kube.kubectl("-n", "ctrl", "get", "configmap", "kube-root-ca.crt", check=False).returncode == 0)


def test_pod_security_admission_enforces_the_namespaces_level(kube):
    kube.namespace("psa")
    kube.kubectl("label", "namespace", "psa", "pod-security.kubernetes.io/enforce=restricted")
    refused = kube.kubectl("-n", "psa", "create", "-f", "-", stdin=yaml.safe_dump(PRIVILEGED), check=False)
    assert refused.returncode != 0
    assert 'violates PodSecurity "restricted:latest"' in refused.stderr and "privileged" in refused.stderr
    kube.kubectl("-n", "psa", "create", "-f", "-", stdin=yaml.safe_dump(RESTRICTED))


def test_the_scheduler_finds_no_node_for_a_pod(kube):
    kube.namespace("sched")
    kube.kubectl("-n", "sched", "create", "-f", "-", stdin=yaml.safe_dump(RESTRICTED))

    def unschedulable():
        pod = json.loads(kube.kubectl("-n", "sched", "get", "pod", "restricted", "-o", "json").stdout)
        return [c for c in pod["status"].get("conditions", [])
                if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"]

    # the scheduler's own words for an empty cluster
    # (kubernetes v1.37.2, pkg/scheduler/scheduler.go, ErrNoNodesAvailable)
    assert until("the scheduler's verdict", unschedulable)[0]["message"] == "no nodes available to schedule pods"


def test_every_component_runs_the_binary_the_build_made(kube):
    for component, pid in kube.plane.pids.items():
        assert Path(f"/proc/{pid}/exe").resolve() == (kube.plan.bindir / component).resolve()
