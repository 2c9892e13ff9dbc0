"""The Pod Security Standards' checks, on the pods a manifest makes. Pure.

Written from Kubernetes' own implementation, kubernetes/pod-security-admission ``policy/
check_*.go`` (at 8f84a87, the policy versions of Kubernetes 1.33-1.37), and the Pod Security
Standards page (kubernetes.io/docs/concepts/security/pod-security-standards): each function
below is one of those checks, named by its upstream ID, and says why a pod fails it.

A namespace's level admits a pod when none of that level's checks fails: ``restricted``
runs every check, ``baseline`` the baseline ones, ``privileged`` none. ``level`` returns the
most restrictive level every pod of a manifest meets, with the failures that keep it from
the next one, so a manifest's header says the level from what was rendered, not from a
table of RDMA modes.

Not modelled: Windows pods (torchpod renders none), and the pod annotations of the
pre-1.30 AppArmor and seccomp forms (torchpod writes the fields).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

LEVELS = ("privileged", "baseline", "restricted")  # least to most restrictive

# check_capabilities_baseline.go: the capabilities a baseline pod may add (the container
# runtimes' default set)
BASELINE_CAPABILITIES = frozenset({"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                                   "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})
# check_sysctls.go, sysctlsAllowedV1Dot37
SAFE_SYSCTLS = frozenset({"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
                          "net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start",
                          "net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time",
                          "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes",
                          "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_slow_start_after_idle",
                          "net.ipv4.tcp_notsent_lowat"})
# check_seLinuxOptions.go, selinuxAllowedTypes1_31
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
# check_restrictedVolumes.go: the volume sources a restricted pod may use
RESTRICTED_VOLUMES = frozenset({"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image",
                                "persistentVolumeClaim", "projected", "secret"})


@dataclass(frozen=True)
class Failure:
    check: str  # the upstream check ID, e.g. "hostNamespaces"
    level: str  # the level whose checks include it: "baseline" or "restricted"
    detail: str  # what in the pod fails it


Pod = Mapping[str, Any]


def _containers(pod: Pod) -> list[Mapping[str, Any]]:
    return [*(pod.get("initContainers") or ()), *(pod.get("containers") or ()),
            *(pod.get("ephemeralContainers") or ())]


def _sc(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("securityContext") or {}


def _names(cs: Sequence[Mapping[str, Any]]) -> str:
    return ", ".join(str(c.get("name")) for c in cs)


# --- baseline -----------------------------------------------------------------------------
def host_namespaces(pod: Pod) -> list[str]:
    return [f"{field}=true" for field in ("hostNetwork", "hostPID", "hostIPC") if pod.get(field)]


def privileged(pod: Pod) -> list[str]:
    bad = [c for c in _containers(pod) if _sc(c).get("privileged")]
    return [f"privileged: true ({_names(bad)})"] if bad else []


def capabilities_baseline(pod: Pod) -> list[str]:
    added = {cap for c in _containers(pod) for cap in ((_sc(c).get("capabilities") or {}).get("add") or ())}
    extra = sorted(added - BASELINE_CAPABILITIES)
    return [f"capabilities.add {extra}"] if extra else []


def host_path_volumes(pod: Pod) -> list[str]:
    bad = [v.get("name") for v in pod.get("volumes") or () if "hostPath" in v]
    return [f"hostPath volumes {bad}"] if bad else []


def host_ports(pod: Pod) -> list[str]:
    """Host ports, as admission sees them: on the host's network the API server defaults each
    port's hostPort to its containerPort first (kubernetes v1.37.2, pkg/apis/core/v1/
    defaults.go, defaultHostNetworkPorts), so a pod that writes none still has them."""
    on_host = bool(pod.get("hostNetwork"))
    ports = [p.get("hostPort") or (p.get("containerPort") if on_host else None)
             for c in _containers(pod) for p in c.get("ports") or ()]
    bad = [p for p in ports if p]
    return [f"hostPort {bad}"] if bad else []


def _profiles(pod: Pod, field: str) -> list[Mapping[str, Any]]:
    return [p for p in [_sc(pod).get(field), *(_sc(c).get(field) for c in _containers(pod))] if p]


def app_armor_profile(pod: Pod) -> list[str]:
    return ["appArmorProfile Unconfined"] if any(p.get("type") == "Unconfined"
                                                 for p in _profiles(pod, "appArmorProfile")) else []


def selinux_options(pod: Pod) -> list[str]:
    out = []
    for opts in _profiles(pod, "seLinuxOptions"):
        if opts.get("type", "") not in SELINUX_TYPES:
            out.append(f"seLinuxOptions.type {opts.get('type')!r}")
        if opts.get("user") or opts.get("role"):
            out.append("seLinuxOptions.user/role set")
    return out


def proc_mount(pod: Pod) -> list[str]:
    bad = [c for c in _containers(pod) if _sc(c).get("procMount") not in (None, "", "Default")]
    return [f"procMount Unmasked ({_names(bad)})"] if bad else []


def seccomp_baseline(pod: Pod) -> list[str]:
    return ["seccompProfile Unconfined"] if any(p.get("type") == "Unconfined"
                                                for p in _profiles(pod, "seccompProfile")) else []


def sysctls(pod: Pod) -> list[str]:
    bad = sorted(s.get("name") for s in _sc(pod).get("sysctls") or () if s.get("name") not in SAFE_SYSCTLS)
    return [f"sysctls {bad}"] if bad else []


def host_probes_and_lifecycle(pod: Pod) -> list[str]:
    def host_of(handler: Any) -> bool:
        return isinstance(handler, Mapping) and any(
            isinstance(h, Mapping) and h.get("host") for h in (handler.get("httpGet"), handler.get("tcpSocket")))

    bad = [c for c in _containers(pod)
           if any(host_of(c.get(p)) for p in ("livenessProbe", "readinessProbe", "startupProbe"))
           or any(host_of(h) for h in (c.get("lifecycle") or {}).values())]
    return [f"probe or lifecycle host set ({_names(bad)})"] if bad else []


# --- restricted ---------------------------------------------------------------------------
def restricted_volumes(pod: Pod) -> list[str]:
    bad = [v.get("name") for v in pod.get("volumes") or () if not set(v) - {"name"} <= RESTRICTED_VOLUMES]
    return [f"volumes of a restricted type {bad}"] if bad else []


def allow_privilege_escalation(pod: Pod) -> list[str]:
    bad = [c for c in _containers(pod) if _sc(c).get("allowPrivilegeEscalation") is not False]
    return [f"allowPrivilegeEscalation not false ({_names(bad)})"] if bad else []


def run_as_non_root(pod: Pod) -> list[str]:
    pod_level = _sc(pod).get("runAsNonRoot")
    bad = [c for c in _containers(pod) if _sc(c).get("runAsNonRoot") is False
           or (_sc(c).get("runAsNonRoot") is None and pod_level is not True)]
    return [f"runAsNonRoot not true ({_names(bad)})"] if bad else []


def run_as_user(pod: Pod) -> list[str]:
    zero = _sc(pod).get("runAsUser") == 0 or any(_sc(c).get("runAsUser") == 0 for c in _containers(pod))
    return ["runAsUser 0"] if zero else []


def seccomp_restricted(pod: Pod) -> list[str]:
    ok = ("RuntimeDefault", "Localhost")
    pod_ok = (_sc(pod).get("seccompProfile") or {}).get("type") in ok
    bad = [c for c in _containers(pod) if (_sc(c).get("seccompProfile") or {}).get("type") not in ok
           and (not pod_ok or "seccompProfile" in _sc(c))]
    return [f"seccompProfile not RuntimeDefault or Localhost ({_names(bad)})"] if bad else []


def capabilities_restricted(pod: Pod) -> list[str]:
    out = []
    caps = [(c, _sc(c).get("capabilities") or {}) for c in _containers(pod)]
    no_drop = [c for c, cap in caps if "ALL" not in (cap.get("drop") or ())]
    if no_drop:
        out.append(f"capabilities.drop lacks ALL ({_names(no_drop)})")
    added = sorted({a for _, cap in caps for a in cap.get("add") or () if a != "NET_BIND_SERVICE"})
    if added:
        out.append(f"capabilities.add {added}")
    return out


CHECKS: tuple[tuple[str, str, Callable[[Pod], list[str]]], ...] = (
    ("hostNamespaces", "baseline", host_namespaces),
    ("privileged", "baseline", privileged),
    ("capabilities_baseline", "baseline", capabilities_baseline),
    ("hostPathVolumes", "baseline", host_path_volumes),
    ("hostPorts", "baseline", host_ports),
    ("appArmorProfile", "baseline", app_armor_profile),
    ("seLinuxOptions", "baseline", selinux_options),
    ("procMount_baseline", "baseline", proc_mount),
    ("seccompProfile_baseline", "baseline", seccomp_baseline),
    ("sysctls", "baseline", sysctls),
    ("hostProbesAndHostLifecycle", "baseline", host_probes_and_lifecycle),
    ("restrictedVolumes", "restricted", restricted_volumes),
    ("allowPrivilegeEscalation", "restricted", allow_privilege_escalation),
    ("runAsNonRoot", "restricted", run_as_non_root),
    ("runAsUser", "restricted", run_as_user),
    ("seccompProfile_restricted", "restricted", seccomp_restricted),
    ("capabilities_restricted", "restricted", capabilities_restricted),
)


def check_pod(pod: Pod) -> list[Failure]:
    """Every failed check of one pod spec, baseline ones first."""
    return [Failure(check, level, detail) for check, level, run in CHECKS for detail in run(pod)]


# A restricted check that replaces a baseline one when the namespace enforces 'restricted':
# admission then runs the restricted check alone (OverrideCheckIDs; pod-security-admission
# v0.37.2, policy/check_capabilities_restricted.go, check_restrictedVolumes.go,
# check_seccompProfile_restricted.go), so a refusal names it and not the baseline one.
OVERRIDES = {"capabilities_restricted": "capabilities_baseline", "restrictedVolumes": "hostPathVolumes",
             "seccompProfile_restricted": "seccompProfile_baseline"}


def failures_at(pod: Pod, wanted: str) -> list[Failure]:
    """The checks a namespace enforcing ``wanted`` refuses ``pod`` on, as admission names
    them: those of that level and below, less the baseline ones a restricted one overrides."""
    found = [f for f in check_pod(pod) if meets(wanted, f.level)]
    if wanted == "restricted":
        found = [f for f in found if f.check not in OVERRIDES.values()]
    return found


# The init container training-operator v1.8.1 adds to every Worker pod of a PyTorchJob that
# has a Master replica (pkg/controller.v1/pytorch/initcontainer.go: setInitContainer and
# its default template, which waits for the Master's name in DNS): it carries no
# securityContext, so such a Worker pod fails 'restricted' whatever the render says.
PYTORCH_INIT_NAME = "init-pytorch"
PYTORCH_INIT: Mapping[str, Any] = {
    "name": PYTORCH_INIT_NAME, "image": "alpine:3.10", "imagePullPolicy": "IfNotPresent",
    "resources": {"limits": {"cpu": "100m", "memory": "20Mi"}, "requests": {"cpu": "50m", "memory": "10Mi"}},
    "command": ["sh", "-c", "nslookup <job>-master-0"]}


def pod_specs(doc: Mapping[str, Any]) -> Iterator[tuple[str, Pod]]:
    """(where, pod spec) of every pod template in one rendered object: a Pod, a Volcano Job's
    tasks, a PyTorchJob's replicas (a Worker with the operator's init container, PYTORCH_INIT),
    a LeaderWorkerSet's templates, a JobSet's jobs, and a
    TrainJob's pod as its runtimePatches make it (the trainer container and the patch)."""
    kind, name, spec = doc.get("kind"), (doc.get("metadata") or {}).get("name"), doc.get("spec") or {}
    if kind == "Pod":
        yield f"Pod/{name}", spec
    elif kind == "Job" and "tasks" in spec:
        for t in spec["tasks"]:
            yield f"Job/{name} task {t['name']}", t["template"].get("spec", {})
    elif kind == "PyTorchJob":
        replicas = spec.get("pytorchReplicaSpecs", {})
        for rtype, r in replicas.items():
            pod = r["template"].get("spec", {})
            if rtype == "Worker" and "Master" in replicas:  # as the operator makes it
                pod = {**pod, "initContainers": [*(pod.get("initContainers") or ()), PYTORCH_INIT]}
            yield f"PyTorchJob/{name} {rtype}", pod
    elif kind == "LeaderWorkerSet":
        lwt = spec.get("leaderWorkerTemplate") or {}
        for key in ("leaderTemplate", "workerTemplate"):
            if key in lwt:
                yield f"LeaderWorkerSet/{name} {key}", lwt[key].get("spec", {})
    elif kind == "JobSet":
        for rj in spec.get("replicatedJobs") or ():
            yield f"JobSet/{name} {rj['name']}", rj["template"]["spec"]["template"].get("spec", {})
    elif kind == "TrainJob":
        yield f"TrainJob/{name}", _train_job_pod(spec)


def _train_job_pod(spec: Mapping[str, Any]) -> Pod:
    trainer = spec.get("trainer") or {}
    pod: dict[str, Any] = {"containers": [{"name": "node", "image": trainer.get("image", ""),
                                           "resources": trainer.get("resourcesPerNode") or {}}]}
    for patch in spec.get("runtimePatches") or ():
        for rj in patch["trainingRuntimeSpec"]["template"]["spec"].get("replicatedJobs", ()):
            patched = rj["template"]["spec"]["template"]["spec"]
            pod.update({k: v for k, v in patched.items() if k != "containers"})
            pod["containers"] = [dict(pod["containers"][0], **c) for c in patched.get("containers", [])]
    return pod


def level(docs: Sequence[Mapping[str, Any]]) -> tuple[str, list[tuple[str, Failure]]]:
    """The most restrictive level every pod of ``docs`` meets, and (where, failure) of each
    check that keeps the manifest from the level above it."""
    failures = [(where, f) for doc in docs for where, pod in pod_specs(doc) for f in check_pod(pod)]
    if any(f.level == "baseline" for _, f in failures):
        return "privileged", [(w, f) for w, f in failures if f.level == "baseline"]
    if failures:
        return "baseline", failures
    return "restricted", []


def meets(found: str, wanted: str) -> bool:
    return LEVELS.index(found) >= LEVELS.index(wanted)
