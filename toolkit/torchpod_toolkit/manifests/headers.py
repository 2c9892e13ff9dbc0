"""The comment lines that open every rendered file: how to submit it, what it needs from the
cluster (operator, Pod Security level, RDMA, the paths every node must share), which
rendezvous it uses, how torch ranks its nodes, what follows a failure, and the
`invoke manifests` line that regenerates it. A line holds only values spec.check held to a
grammar of printable ASCII, and the Regenerate line's words quoted with every other
character escaped (regenerate.invoke_line): no value can end a comment line and start code
or a document. Pure.
"""

from __future__ import annotations

import re

from torchpod.contract import ENV_PRESET, SITE_DEPS
from torchpod.errors import InputError

from . import jobs, kube, podsecurity
from .jobs import RESTARTS
from .regenerate import invoke_line
from .shellwords import quote
from .spec import JobSpec

# Why a job's pods fail a Pod Security check, by check: what the job asked for that needs it.
WHY = {
    "hostNamespaces": "RDMA over the host's NICs (--rdma hostnetwork)",
    "hostPorts": "on the host's network each containerPort is a hostPort (--rdma hostnetwork)",
    "hostPathVolumes": "",  # named by volume (HOST_PATH_WHY)
    "capabilities_baseline": "NCCL pins memory for RDMA (IPC_LOCK)",
    "privileged": "--privileged",
    "runAsNonRoot": "IPC_LOCK takes effect for root alone",
    "capabilities_restricted": "IPC_LOCK takes effect for root alone",
    "runAsUser": "--run-as-user 0",
}

# Who asked for a hostPath volume, by the name kube.volumes gives it
HOST_PATH_WHY = (("devinf", "the host's /dev/infiniband (--rdma hostnetwork)"),
                 ("site-", "the node's net plugin and libfabric (the fabric's host paths)"),
                 ("volume-", "--volume hostpath:"))

# what a failure of the operator's own container (podsecurity.PYTORCH_INIT) is put down to
INJECTED = "the init container training-operator adds to Worker pods, without a securityContext"


def _why(failure: podsecurity.Failure) -> str:
    """Why the job fails a check: the operator's container, else what torchpod's option needs."""
    if podsecurity.PYTORCH_INIT_NAME in failure.detail:
        return INJECTED
    if failure.check == "hostPathVolumes":
        names = re.findall(r"'([^']+)'", failure.detail)
        return ", ".join(dict.fromkeys(why for name in names for prefix, why in HOST_PATH_WHY
                                       if name.startswith(prefix)))
    return WHY.get(failure.check, "")


def pod_security(spec: JobSpec, docs=None) -> tuple[str, str]:
    """(the Pod Security Standards level the namespace must allow, the header's text for it),
    judged on the rendered pods by torchpod_toolkit.manifests.podsecurity, never from a table."""
    level, failures = podsecurity.level(kube.objects(spec) if docs is None else docs)
    checks = list(dict.fromkeys((f.check, f.level) for _, f in failures))
    why = {f.check: _why(f) for _, f in reversed(failures)}  # the first failure of a check speaks for it
    reasons = "; ".join(f"{c}: {why[c]}" if why[c] else c for c, _ in checks)
    if level == "restricted":
        return level, "'restricted' (every check of the Pod Security Standards passes on the rendered pods)"
    missed = "baseline" if level == "privileged" else "restricted"
    text = f"'{level}' (fails {missed}: {reasons})"
    if level == "privileged":
        text += ": label the namespace pod-security.kubernetes.io/enforce=privileged"
    return level, text


def require_level(spec: JobSpec, docs) -> None:
    """--pod-security LEVEL: the rendered pods meet it, else one line naming every check of
    that level they fail, and why the job needs what fails it."""
    if not spec.pod_security:
        return
    failed = [f for doc in docs for _, pod in podsecurity.pod_specs(doc)
              for f in podsecurity.failures_at(pod, spec.pod_security)]
    if not failed:
        return
    named = "; ".join(dict.fromkeys(f"{f.check} ({f.detail}: {_why(f)})" if _why(f) else f"{f.check} ({f.detail})"
                                    for f in failed))
    raise InputError(f"--pod-security={spec.pod_security} cannot be met: the pods fail {named}")


def shared_paths(spec: JobSpec) -> list[str]:
    """The header lines naming the paths a batch script needs on every node: the submit
    directory (the image file, the bound workdir, pbsdsh's statuses) and the node file the
    launcher reads inside the container (the kind's record). Nothing for a kind whose nodes
    share no submit directory (a SkyPilot task)."""
    kind = jobs.kind(spec.scheduler)
    if not kind.shared_dir:
        return []
    seen = ["the submit directory"]
    if spec.runtime in ("apptainer", "enroot"):
        seen.append(f"the {'SIF' if spec.runtime == 'apptainer' else 'squashfs'} written there "
                    f"(or TORCHPOD_{'SIF' if spec.runtime == 'apptainer' else 'SQSH'})")
    if kind.shared_writes:
        seen.append(f"{kind.shared_writes} there")
    node_file = kind.node_file
    if node_file and spec.runtime != "none":
        seen.append(f"${node_file}, bound into the container")
    lines = ["Shared: every node must see, at the same path, " + "; ".join(seen)]
    if spec.runtime == "podman":
        lines.append("podman-hpc: `pull` migrates the image to its squash directory, which must be on a "
                     "filesystem every node sees (a site setting; node-local unless the site sets it)")
    return lines


def ranks_line(spec: JobSpec, kind: jobs.JobKind) -> str:
    """How torch will number this job's nodes: torchpod orders its c10d or etcd-v2
    rendezvous by the node index (the launcher's torchpod.order), after the topology the
    kind's nodes are told, if any; an elastic job's rounds rank the nodes that came."""
    first = f"{kind.rank_domains}, then " if kind.rank_domains else ""
    if spec.min_nodes is not None:
        return (f"Ranks: each round ranks the nodes that joined by {first}node index (torchpod orders the "
                "rendezvous); a node's rank is known once its round forms")
    if kind.rank_domains:
        return f"Ranks: by {first}node index (torchpod orders the rendezvous): one domain's nodes are contiguous"
    return "Ranks: torch's group rank is the node index (torchpod orders the rendezvous by it)"


def restarts_line(spec: JobSpec, kind: jobs.JobKind) -> str:
    """What follows a failure: how many restarts the kind makes and how the job ends, as the
    kind declares it (JobKind.restarts), the elastic form under --nodes MIN:MAX."""
    text = kind.restarts_elastic if spec.min_nodes is not None and kind.restarts_elastic else kind.restarts
    return f"Restarts: {text.format(n=RESTARTS)}"


def submit_line(kind: jobs.JobKind, filename: str, piped: bool) -> str:
    """How to submit: the file by name, or, for a file printed to a pipe (``piped``), the
    submitter's standard-input form (JobKind.piped), or that the file must be written first."""
    if not piped:
        return f"Submit: {kind.submit} {filename}"
    if kind.piped:
        return f"Submit: {kind.piped} with this file on standard input"
    return (f"Submit: {kind.submit} {filename} once this is saved as {filename} ({kind.submit.split()[0]} reads no "
            "standard input; --out DIR writes it)")


def header(spec: JobSpec, filename: str, piped: bool = False) -> list[str]:
    gpus = f"{spec.gpus_per_node} GPUs" if spec.gpus_per_node else "CPU only"
    kind = jobs.kind(spec.scheduler)
    lines = [f"torchpod {spec.scheduler} job '{spec.name}': {spec.nnodes} nodes x {gpus}, image {spec.image}"]
    if kind.kube:
        lines.append(f"{submit_line(kind, filename, piped)}   (needs {kind.requires})")
        lines.append(f"Pod Security: namespace level {pod_security(spec)[1]}")
    else:
        lines.append(f"{submit_line(kind, filename, piped)}   (container runtime: {spec.runtime}"
                     + (f"; {kind.fan_out})" if kind.fan_out else ")"))
        lines += shared_paths(spec)
    if spec.rdzv == "etcd":
        where = "the etcd Pod and Service in this file" if spec.etcd_server else "an etcd you run"
        lines.append(f"Rendezvous: etcd-v2 at {spec.etcd_endpoint} ({where}; it must serve the v2 API)")
        if spec.etcd_server and "@" not in spec.etcd_image:
            lines.append(f"WARNING the etcd Pod's image {spec.etcd_image} is a tag, which its registry can move: "
                         "pin it with --etcd-image REPO@sha256:DIGEST (`docker buildx imagetools inspect "
                         f"{spec.etcd_image}` prints the digest)")
    else:
        lines.append(f"Rendezvous: c10d on node 0, port {spec.port}; torchpod derives it from the scheduler")
    lines.append(ranks_line(spec, kind))
    lines.append(restarts_line(spec, kind))
    if spec.rdma == "hostnetwork":
        lines.append("RDMA: hostNetwork + /dev/infiniband from the host (OKE style); "
                     "NICs and GIDs as the host has them")
    elif spec.rdma == "device-plugin":
        lines.append(f"RDMA: one {spec.rdma_resource} per pod from the RDMA device plugin; the NICs' netdevs must "
                     "reach the pod (e.g. a Multus secondary network)")
    if spec.privileged:
        lines.append("WARNING --privileged: every host device and capability is open to the container "
                     "(and AppArmor/seccomp are off); use it only to rule out a permissions problem")
    if spec.preset:
        lines.append(f"Fabric: {ENV_PRESET.name}={spec.preset}; the launcher applies that shape's NCCL settings")
    binds = spec.fabric_binds()
    if binds and (spec.kube or spec.runtime != "none"):
        lines.append("Net plugin: bound in from the host, where the launcher looks for it: "
                     + ", ".join(f"{h} -> {c}" for h, c in binds)
                     + (f"; add the plugin's other dependencies under {SITE_DEPS}"
                        if spec.fabric == "slingshot" else ""))
    if spec.mnnvl:
        lines.append(f"MNNVL: ComputeDomain {spec.compute_domain} gives every pod an IMEX channel from "
                     f"{spec.compute_domain_channel} (needs NVIDIA's DRA driver for GPUs >= 25.3, Kubernetes >= 1.32 "
                     f"with DRA, {kind.mnnvl}); GB200 nodes are aarch64: the image must have "
                     "a linux/arm64 build")
    lines += script_source(spec)
    lines.append(f"Regenerate: {invoke_line(spec)}")
    for line in lines:  # spec.check's grammars make this hold; a bug must not write a file
        if not all(" " <= ch <= "~" for ch in line):
            raise InputError(f"a header line would hold a character outside printable ASCII: {line!r}")
    return ["# " + line for line in lines]


# The image's working directory (docker/Dockerfile WORKDIR): where a pod starts without --workdir.
IMAGE_WORKDIR = "/workspace"


def script_source(spec: JobSpec) -> list[str]:
    """A note for a Kubernetes job whose script is a relative path with no --volume at (or
    above) the working directory: nothing in the manifest puts it there, so it must be in
    the image. (An HPC job binds its submit directory there; an absolute path says itself.)"""
    if not spec.kube or spec.workload != "train" or spec.command[0].startswith("/"):
        return []
    workdir = spec.workdir.rstrip("/") or "/" if spec.workdir else IMAGE_WORKDIR
    if any(workdir == v.path or workdir.startswith(v.path.rstrip("/") + "/") for v in spec.volumes):
        return []
    script = quote(spec.command[0], ascii_only=True)
    return [f"Script: {script} is read from {workdir} in the container, where nothing here mounts it: it must be "
            f"in the image there, or mounted with --volume (e.g. pvc:CLAIM:{workdir} or configmap:NAME:{workdir})"]


# Header lines a user must see even when the file goes down a pipe: `invoke manifests`
