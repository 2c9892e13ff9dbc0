"""A real Kubernetes control plane from the programs `invoke kube.build` made (the pinned
release's etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl),
started by torchpod_toolkit.kube.plane: kubectl reads its health and version through the
administrator's kubeconfig, Pod Security admission refuses a privileged pod in a
namespace that enforces ``restricted`` and admits a restricted one, the controller manager
gives a new namespace its service account and CA bundle, the scheduler marks a pod with no
node to run on unschedulable, and stopping the plane leaves no process behind.

Without the programs the test fails under CI (TORCHPOD_REQUIRE_TOOLS=1) and skips elsewhere,
naming `invoke kube.build`."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from torchpod.errors import TorchpodError
from torchpod_toolkit.kube import build, plane

from needs import missing
from paths import ROOT

PRIVILEGED = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "privileged"},
              "spec": {"containers": [{"name": "c", "image": "registry.invalid/x:1",
                                       "securityContext": {"privileged": True}}]}}
RESTRICTED = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "restricted"},
              "spec": {"securityContext": {"runAsNonRoot": True, "runAsUser": 1000,
                                           "seccompProfile": {"type": "RuntimeDefault"}},
                       "containers": [{"name": "c", "image": "registry.invalid/x:1",
                                       "securityContext": {"allowPrivilegeEscalation": False,
                                                           "capabilities": {"drop": ["ALL"]}}}]}}


@functools.lru_cache(maxsize=None)
def _plan() -> build.Plan:
    try:
        return build.plan_for(ROOT, os.environ)
    except TorchpodError as exc:
        missing(f"a Go toolchain and kube/'s module ({exc})")
        raise AssertionError("unreachable") from None


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory):
    absent = [p.name for p in _plan().missing()]
    if absent:
        missing(f"{', '.join(absent)} in {_plan().bindir} (`invoke kube.build`)")
    started = plane.start(_plan().bindir, tmp_path_factory.mktemp("kube") / "plane")
    yield started
    plane.stop(started)
    assert not plane.running(started)


def kubectl(control_plane, *args: str, stdin: str = "", check: bool = True) -> subprocess.CompletedProcess[str]:
    argv = [str(_plan().bindir / "kubectl"), f"--kubeconfig={control_plane.kubeconfig}", "--request-timeout=30s",
            *args]
    result = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=60)
    if check and result.returncode != 0:
        pytest.fail(f"{' '.join(args)}: exit {result.returncode}: {result.stderr}")
    return result


def _until(what: str, probe, seconds: float = 90.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.5)
    pytest.fail(f"{what} within {seconds:.0f} s")


def namespace(control_plane, name: str) -> None:
    """A new namespace, once the controller manager has given it the service account pods need."""
    kubectl(control_plane, "create", "namespace", name)
    _until(f"the default service account of {name}",
           lambda: kubectl(control_plane, "-n", name, "get", "serviceaccount", "default", check=False).returncode == 0)


def test_kubectl_reads_the_api_servers_health_and_the_pinned_release(control_plane):
    ready = kubectl(control_plane, "get", "--raw", "/readyz?verbose").stdout
    assert "readyz check passed" in ready and "[+]etcd ok" in ready
    version = json.loads(kubectl(control_plane, "get", "--raw", "/version").stdout)
    assert version["gitVersion"] == _plan().kubernetes
    assert kubectl(control_plane, "auth", "whoami", "-o", "json").returncode == 0


def test_the_controller_manager_gives_a_namespace_its_service_account_and_ca(control_plane):
    namespace(control_plane, "ctrl")
    _until("the kube-root-ca.crt ConfigMap",
           lambda: kubectl(control_plane, "-n", "ctrl", "get", "configmap", "kube-root-ca.crt",
                           check=False).returncode == 0)


def test_pod_security_admission_enforces_the_namespaces_level(control_plane):
    namespace(control_plane, "psa")
    kubectl(control_plane, "label", "namespace", "psa", "pod-security.kubernetes.io/enforce=restricted")
    refused = kubectl(control_plane, "-n", "psa", "create", "-f", "-", stdin=yaml.safe_dump(PRIVILEGED), check=False)
    assert refused.returncode != 0
    assert 'violates PodSecurity "restricted:latest"' in refused.stderr and "privileged" in refused.stderr
    kubectl(control_plane, "-n", "psa", "create", "-f", "-", stdin=yaml.safe_dump(RESTRICTED))


def test_the_scheduler_finds_no_node_for_a_pod(control_plane):
    namespace(control_plane, "sched")
    kubectl(control_plane, "-n", "sched", "create", "-f", "-", stdin=yaml.safe_dump(RESTRICTED))

    def unschedulable():
        pod = json.loads(kubectl(control_plane, "-n", "sched", "get", "pod", "restricted", "-o", "json").stdout)
        return [c for c in pod["status"].get("conditions", [])
                if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"]

    # the scheduler's own words for an empty cluster
    # (kubernetes v1.37.2, pkg/scheduler/scheduler.go, ErrNoNodesAvailable)
    assert _until("the scheduler's verdict", unschedulable)[0]["message"] == "no nodes available to schedule pods"


def test_every_component_runs_the_binary_the_build_made(control_plane):
    for component, pid in control_plane.pids.items():
        assert Path(f"/proc/{pid}/exe").resolve() == (_plan().bindir / component).resolve()
