"""A real Kubernetes control plane from the programs `invoke kube.build` made (the pinned
release's etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl),
started by torchpod_toolkit.kube.plane (the ``kube`` fixture): kubectl reads its health and
version through the administrator's kubeconfig, Pod Security admission refuses a privileged
pod in a namespace that enforces ``restricted`` and admits a restricted one, the controller
manager gives a new namespace its service account and CA bundle, the scheduler marks a pod
with no node to run on unschedulable, and stopping the plane leaves no process behind. The
pods of every kind torchpod renders meet, at the API server's own Pod Security admission,
exactly the level torchpod's checker states.

Without the programs the tests fail under CI (TORCHPOD_REQUIRE_TOOLS=1) and skip elsewhere,
naming `invoke kube.build`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from torchpod.errors import InputError
from torchpod_toolkit.manifests import podsecurity, render
from torchpod_toolkit.manifests.spec import JobSpec

from admission_cases import CASES, IMAGE, KINDS, documents
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


# --- torchpod's Pod Security checker against the API server's admission ------------------------

LEVELS = ("restricted", "baseline", "privileged")  # strictest first
ADMITTED = re.compile(r"^pod/(\S+) created \(server dry run\)$", re.MULTILINE)
FORBIDDEN = re.compile(r'pods "([^"]+)" is forbidden: (violates PodSecurity "([a-z]+):latest": .*)$', re.MULTILINE)
# each check's ForbiddenReason, the words admission refuses a pod with
# (kubernetes/pod-security-admission v0.37.2, policy/check_*.go)
REASONS = {
    "hostNamespaces": "host namespaces", "privileged": "privileged",
    "capabilities_baseline": "non-default capabilities", "hostPathVolumes": "hostPath volumes",
    "hostPorts": "hostPort", "appArmorProfile": "forbidden AppArmor profile", "seLinuxOptions": "seLinuxOptions",
    "procMount_baseline": "procMount", "seccompProfile_baseline": "seccompProfile", "sysctls": "forbidden sysctls",
    "hostProbesAndHostLifecycle": "probe or lifecycle host", "restrictedVolumes": "restricted volume types",
    "allowPrivilegeEscalation": "allowPrivilegeEscalation != false", "runAsNonRoot": "runAsNonRoot != true",
    "runAsUser": "runAsUser=0", "seccompProfile_restricted": "seccompProfile",
    "capabilities_restricted": "unrestricted capabilities",
}


def _rendered_pods() -> tuple[dict[str, tuple[tuple[str, str], dict]], dict[tuple[str, str], str]]:
    """Every pod of every kind and option set (tests/admission_cases.py), by a pod name of its
    own, with its job; and each job's level as torchpod's checker computes it."""
    pods, levels = {}, {}
    for kind in KINDS:
        for i, case in enumerate(CASES):
            docs = documents(kind, case)
            if docs is not None:
                levels[(kind, case)] = podsecurity.level(docs)[0]
                for j, (_, spec) in enumerate(p for doc in docs for p in podsecurity.pod_specs(doc)):
                    pods[f"{kind}-{i}-{j}"] = ((kind, case), spec)
    return pods, levels


def _reasons(message: str) -> set[str]:
    """The ForbiddenReasons in one refusal: each follows the level or a detail's ")" and is
    followed by its own "(" detail."""
    return {r for r in REASONS.values() if re.search(rf'(?:": |\), ){re.escape(r)}s? \(', message)}


def test_every_kinds_pods_meet_exactly_the_level_torchpods_checker_states_for_the_same_reasons(kube):
    """Each pod of every rendered kind and option set is created with --dry-run=server in a
    namespace enforcing each level: the strictest level the API server's Pod Security
    admission admits each job's pods at is the level torchpod_toolkit.manifests.podsecurity
    computes (the header's), and each refusal names exactly the checks the checker fails
    that pod on at that level: what `--pod-security LEVEL` refuses before any apply."""
    pods, expected = _rendered_pods()
    stream = yaml.safe_dump_all([{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
                                 for name, (_, spec) in pods.items()])
    admitted_at: dict[str, str] = {}
    for level in LEVELS:
        kube.namespace(f"psa-{level}")
        kube.kubectl("label", "namespace", f"psa-{level}", f"pod-security.kubernetes.io/enforce={level}")
        done = kube.kubectl("-n", f"psa-{level}", "create", "--dry-run=server", "-f", "-", stdin=stream, check=False)
        admitted = set(ADMITTED.findall(done.stdout))
        refused = {name: (message, at) for name, message, at in FORBIDDEN.findall(done.stderr)}
        assert set(pods) == admitted | set(refused), f"neither admitted nor refused by Pod Security at {level}: " \
            f"{sorted(set(pods) - admitted - set(refused))}\n{done.stderr[-4000:]}"
        for name in admitted:
            admitted_at.setdefault(name, level)
        for name, (message, at) in refused.items():
            ours = {REASONS[f.check] for f in podsecurity.failures_at(pods[name][1], level)}
            assert (at, _reasons(message)) == (level, ours), f"{name}: {message}"
    found: dict[tuple[str, str], str] = {}
    for name, (job, _) in pods.items():  # a job's level is its least admitted pod's
        found[job] = max(found.get(job, LEVELS[0]), admitted_at[name], key=LEVELS.index)
    assert found == expected


@pytest.mark.parametrize("options", [{"run_as_user": 0}, {"volume": ("hostpath:/data:/data",)},
                                     {"rdma": "hostnetwork"}, {"privileged": True}])
def test_what_manifests_refuses_for_a_level_the_api_server_refuses_for_the_same_checks(kube, options):
    """`invoke manifests --pod-security restricted` refuses these jobs before anything is
    applied, naming the checks; the same job rendered without the option is refused by the
    API server's admission in a namespace enforcing 'restricted', naming the same checks."""
    with pytest.raises(InputError) as info:
        render.render(JobSpec("jobset", 2, IMAGE, ("t.py",), name="rf", namespace="rf", pod_security="restricted",
                              **options))
    ours = {REASONS[c] for c in re.findall(r"(?:the pods fail |; )(\w+) \(", str(info.value))}
    (out,) = [o for o in render.render(JobSpec("jobset", 2, IMAGE, ("t.py",), name="rf", namespace="rf", **options))
              if o.name.endswith(".yaml")]
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"rf-{i}"}, "spec": spec}
            for i, (_, spec) in enumerate(p for doc in yaml.safe_load_all(out.text) if doc
                                          for p in podsecurity.pod_specs(doc))]
    namespace = f"refuse-{len(ours)}-{sorted(options)[0].replace('_', '-')}"
    kube.namespace(namespace)
    kube.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    done = kube.kubectl("-n", namespace, "create", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump_all(pods),
                        check=False)
    refusals = FORBIDDEN.findall(done.stderr)
    assert len(refusals) == len(pods) and done.returncode != 0, done.stderr
    assert {frozenset(_reasons(message)) for _, message, _ in refusals} == {frozenset(ours)}, (str(info.value),
                                                                                                done.stderr)
