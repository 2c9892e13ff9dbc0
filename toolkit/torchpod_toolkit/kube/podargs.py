"""The ``docker create`` command lines of a pod, pure: the pod's sandbox (the container that
holds its network namespace, hostname and DNS names, as the kubelet's pause container does)
and each of its containers, joined to the sandbox's network.

Every command line is a list of words, never a shell line. Container names follow the
dockershim's ``k8s_<container>_<pod>_<namespace>_<uid>_<attempt>`` (kubernetes v1.23,
pkg/kubelet/dockershim/naming.go), but for the sandbox's, ``k8s_POD_<uid>`` (one DNS label:
:func:`sandbox_name`), and are checked against Docker's grammar
(moby, daemon/names/names.go: ``[a-zA-Z0-9][a-zA-Z0-9_.-]+``). A pod's DNS names are those
cluster DNS gives a pod with a hostname and a subdomain behind a headless Service
(kubernetes' DNS specification, ``<hostname>.<subdomain>.<namespace>.svc.<zone>``), with the
shorter forms the search path would complete, as network aliases.
"""

from __future__ import annotations

import csv
import io
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from .podenv import ConfigError, quantity
from .podstatus import TERMINATION_LOG

Obj = Mapping[str, Any]
ZONE = "cluster.local"
DOCKER_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]+", re.ASCII)
# One word of an execve argument list: Linux refuses a longer one (MAX_ARG_STRLEN).
MAX_WORD = 128 * 1024
SANDBOX = "POD"  # the dockershim's name for the sandbox in a container's name


# The longest DNS label (RFC 1035 section 2.3.4). Docker's embedded DNS server, the cluster
# DNS of these pods, answers a reverse (PTR) query for a container's address with
# ``<container name>.<network>``; a name longer than a label cannot be packed into the answer,
# so the server sends none and the asking resolver waits out its timeout (glibc: 5 s, twice,
# resolv.conf(5)). torch's c10d looks up the name of each store connection's address
# (torch/csrc/distributed/c10d/socket.cpp, "The hostname of the client socket cannot be
# retrieved"), which stalled every rendezvous and process group on this plane by 10 s at each
# step. A cluster's DNS (CoreDNS' kubernetes plugin) answers such a query at once, with a
# name or NXDOMAIN: the sandbox, whose address the pod's containers share, gets a name that fits.
DNS_LABEL_MAX = 63


def sandbox_name(uid: str) -> str:
    """The Docker name of a pod's sandbox: the dockershim's ``k8s_POD_`` and the pod's UID (a
    36-character UUID, unique per pod), so that the name fits in one DNS label; a ValueError
    when it does not (a UID that is not a UUID)."""
    name = f"k8s_{SANDBOX}_{uid}"
    if not DOCKER_NAME.fullmatch(name) or len(name) > DNS_LABEL_MAX:
        raise ValueError(f"{name[:120]!r} is not a Docker container name of at most {DNS_LABEL_MAX} characters "
                         "([a-zA-Z0-9][a-zA-Z0-9_.-]+)")
    return name


def container_name(namespace: str, pod: str, uid: str, container: str, attempt: int) -> str:
    """The Docker name of one attempt of one container; a ValueError when it breaks Docker's grammar."""
    name = f"k8s_{container}_{pod}_{namespace}_{uid}_{attempt}"
    if not DOCKER_NAME.fullmatch(name):
        raise ValueError(f"{name[:120]!r} is not a Docker container name ([a-zA-Z0-9][a-zA-Z0-9_.-]+)")
    return name


def hostname(pod: Obj) -> str:
    """The pod's hostname: spec.hostname, else its name cut to 63 characters as the kubelet does."""
    spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
    return str(spec.get("hostname") or meta.get("name", ""))[:63].rstrip("-.")


def dns_names(pod: Obj) -> list[str]:
    """The names peers resolve the pod by: none without a subdomain."""
    subdomain = (pod.get("spec") or {}).get("subdomain")
    if not subdomain:
        return []
    namespace = (pod.get("metadata") or {}).get("namespace", "default")
    stem = f"{hostname(pod)}.{subdomain}"
    return [stem, f"{stem}.{namespace}", f"{stem}.{namespace}.svc", f"{stem}.{namespace}.svc.{ZONE}"]


def _port_matches(service_port: Obj, pod: Obj) -> bool:
    """Whether a connection to the Service's port reaches the pod on that same port: its
    targetPort is absent or that number, or names a container port of that number."""
    port, target = service_port.get("port"), service_port.get("targetPort", service_port.get("port"))
    if isinstance(target, str):
        named = [p.get("containerPort") for c in (pod.get("spec") or {}).get("containers") or ()
                 for p in c.get("ports") or () if p.get("name") == target]
        return named == [port]
    return target == port


def service_names(pod: Obj, services: Sequence[Obj]) -> list[str]:
    """The names of the Services that select the pod, in the forms the search path completes.
    Cluster DNS answers a headless Service's name with its pods' addresses; a ClusterIP
    Service's name reaches them through kube-proxy, which the stand-in has not: its name is
    given to the pod itself only where every port of the Service is the pod's same port (a
    Service that maps ports is not resolved: stricter than a cluster, never kinder). A
    Service made after the pod's sandbox is not seen."""
    meta = pod.get("metadata") or {}
    namespace, labels = meta.get("namespace", "default"), meta.get("labels") or {}
    names: list[str] = []
    for service in services:
        smeta, spec = service.get("metadata") or {}, service.get("spec") or {}
        selector = spec.get("selector") or {}
        if smeta.get("namespace", "default") != namespace or not selector:
            continue
        if any(labels.get(key) != value for key, value in selector.items()):
            continue
        if spec.get("clusterIP") != "None" and not all(_port_matches(p, pod) for p in spec.get("ports") or ()):
            continue
        stem = str(smeta.get("name"))
        names += [stem, f"{stem}.{namespace}", f"{stem}.{namespace}.svc", f"{stem}.{namespace}.svc.{ZONE}"]
    return names


def _labels(labels: Mapping[str, str]) -> list[str]:
    return [f"--label={key}={value}" for key, value in sorted(labels.items())]


def sandbox_argv(pod: Obj, name: str, image: str, network: str, labels: Mapping[str, str],
                 holds: Sequence[str] = (), services: Sequence[Obj] = ()) -> list[str]:
    """The sandbox: the pod's image sleeping, on the cluster's network with its hostname,
    DNS search path and names (its own, and those of the ``services`` that select it). It
    also mounts the docker volumes in ``holds`` (a memory emptyDir's tmpfs), which docker
    would otherwise unmount, and empty, whenever no container of the pod runs, between a
    container's exit and its restart."""
    namespace = (pod.get("metadata") or {}).get("namespace", "default")
    argv = ["docker", "create", "--name", name, *_labels(labels), "--network", network, "--hostname", hostname(pod)]
    for index, volume in enumerate(holds):
        argv.append(f"--mount=type=volume,source={volume},target=/run/pod-volumes/{index}")
    subdomain = (pod.get("spec") or {}).get("subdomain")
    if subdomain:
        argv += ["--domainname", f"{subdomain}.{namespace}.svc.{ZONE}"]
    for alias in dict.fromkeys([*dns_names(pod), *service_names(pod, services)]):
        argv += ["--network-alias", alias]
    for search in (f"{namespace}.svc.{ZONE}", f"svc.{ZONE}", ZONE):
        argv += ["--dns-search", search]
    return argv + ["--dns-option", "ndots:5", "--entrypoint", "sleep", image, "infinity"]


# --- securityContext and resources ---------------------------------------------------------------

def _merged(pod: Obj, container: Obj) -> dict[str, Any]:
    return {**((pod.get("spec") or {}).get("securityContext") or {}), **(container.get("securityContext") or {})}


def security_args(pod: Obj, container: Obj, image_user: str) -> list[str]:
    """docker create's flags for the pod's and the container's securityContext (the
    container's fields over the pod's, as the kubelet merges them)."""
    sec, pod_sec = _merged(pod, container), (pod.get("spec") or {}).get("securityContext") or {}
    argv: list[str] = []
    user, group = sec.get("runAsUser"), sec.get("runAsGroup")
    if user is not None:
        argv += ["--user", f"{int(user)}:{int(group)}" if group is not None else str(int(user))]
    elif group is not None:
        raise ConfigError("runAsGroup without runAsUser: docker takes a group only beside a user")
    if sec.get("runAsNonRoot") is True:
        effective = str(user) if user is not None else (image_user.split(":")[0] or "0")
        if effective in ("0", "root"):
            raise ConfigError("container has runAsNonRoot and image will run as root")
    for gid in [pod_sec.get("fsGroup"), *(pod_sec.get("supplementalGroups") or [])]:
        if gid is not None:
            argv += ["--group-add", str(int(gid))]
    if sec.get("readOnlyRootFilesystem") is True:
        argv.append("--read-only")
    if sec.get("privileged") is True:
        argv.append("--privileged")
    if sec.get("allowPrivilegeEscalation") is False:
        argv += ["--security-opt", "no-new-privileges"]
    capabilities = sec.get("capabilities") or {}
    for flag, key in (("--cap-drop", "drop"), ("--cap-add", "add")):
        for cap in capabilities.get(key) or []:
            if not re.fullmatch(r"[A-Za-z_]+", str(cap), re.ASCII):
                raise ConfigError(f"capability {str(cap)[:40]!r} is not a capability name")
            argv += [flag, str(cap)]
    return argv


def resource_args(container: Obj, host_cpus: int = 0) -> list[str]:
    """--cpus and --memory from the container's limits (requests shape no docker flag).

    A CPU limit above ``host_cpus`` (the docker host's count, when given) is cut to it: the
    kubelet writes any limit as a CFS quota, which the kernel takes even beyond the
    machine's CPUs, while docker refuses ``--cpus`` above the host's count; a quota of
    every CPU and one of more constrain alike. A node advertises more CPUs than this host
    may have, and a pod asking for them is still run."""
    limits = (container.get("resources") or {}).get("limits") or {}
    argv: list[str] = []
    if "cpu" in limits:
        cpus = quantity(limits["cpu"])
        if host_cpus > 0:
            cpus = min(cpus, Fraction(host_cpus))
        argv += ["--cpus", f"{float(cpus):.3f}".rstrip("0").rstrip(".")]
    if "memory" in limits:
        argv += ["--memory", f"{int(quantity(limits['memory']))}b"]
    return argv


# --- mounts ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Source:
    """Where a pod volume lives for docker: a host folder (bind) or a named docker volume."""

    kind: str  # "bind" or "volume"
    where: str
    read_only: bool = False


def _csv(fields: Sequence[str]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow(fields)
    return out.getvalue()


def mount_args(container: Obj, sources: Mapping[str, Source]) -> list[str]:
    """--mount for each volumeMount (docker reads the value as one CSV record)."""
    argv: list[str] = []
    for mount in container.get("volumeMounts") or []:
        source = sources.get(mount.get("name"))
        if source is None:
            raise ConfigError(f'cannot find volume "{mount.get("name")}" to mount into container '
                              f'"{container.get("name")}"')
        target, sub = str(mount.get("mountPath", "")), str(mount.get("subPath") or "")
        if not target.startswith("/"):
            raise ConfigError(f"mountPath {target[:80]!r} of volume {mount.get('name')!r} is not absolute")
        where = source.where
        if sub:
            if sub.startswith("/") or ".." in sub.split("/") or source.kind != "bind":
                raise ConfigError(f"subPath {sub[:80]!r} must be a relative path inside a folder volume")
            where = posixpath.join(where, sub)
        fields = [f"type={source.kind}", f"source={where}", f"target={target}"]
        if source.read_only or mount.get("readOnly") is True:
            fields.append("readonly")
        argv.append(f"--mount={_csv(fields)}")
    return argv


# --- the container -------------------------------------------------------------------------------------

def container_argv(pod: Obj, container: Obj, *, name: str, sandbox: str, env: Mapping[str, str],
                   command: Sequence[str], args: Sequence[str], sources: Mapping[str, Source],
                   labels: Mapping[str, str], image_user: str = "", host_cpus: int = 0,
                   message_file: str = "") -> list[str]:
    """One container, in the sandbox's network namespace: its environment, user, limits,
    mounts (``message_file`` at its terminationMessagePath, as the kubelet binds the file it
    made for the container's termination message), and the command and args as Kubernetes
    means them (a command replaces the image's entrypoint and its default arguments; args
    alone replace only the arguments)."""
    image = str(container.get("image", ""))
    if not image or image.startswith("-"):
        raise ConfigError(f"image {image[:80]!r} is not an image reference")
    argv = ["docker", "create", f"--name={name}", *_labels(labels), f"--network=container:{sandbox}"]
    for key, value in env.items():
        if not key or "=" in key or "\0" in key + value:
            raise ConfigError(f"environment variable {key[:80]!r}: a name without '=' and no NUL byte is required")
        argv.append(f"--env={key}={value}")
    argv += security_args(pod, container, image_user) + resource_args(container, host_cpus)
    argv += mount_args(container, sources)
    if message_file:
        target = str(container.get("terminationMessagePath") or TERMINATION_LOG)
        if not target.startswith("/"):
            raise ConfigError(f"terminationMessagePath {target[:80]!r} is not absolute")
        argv.append(f"--mount={_csv(['type=bind', f'source={message_file}', f'target={target}'])}")
    if container.get("workingDir"):
        argv.append(f"--workdir={container['workingDir']}")
    if container.get("stdin") is True:
        argv.append("--interactive")
    if container.get("tty") is True:
        argv.append("--tty")
    if command:
        argv += [f"--entrypoint={command[0]}", image, *command[1:], *args]
    else:
        argv += [image, *args]
    long = [w for w in argv if len(w.encode("utf-8", "surrogatepass")) > MAX_WORD]
    if long:
        raise ConfigError(f"a word of {len(long[0])} characters ({long[0][:40]!r}...) exceeds the "
                          f"{MAX_WORD}-byte limit of one argument on docker's command line")
    return argv
