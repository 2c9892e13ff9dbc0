"""Files for one JobSpec: YAML for Kubernetes, a batch script for Slurm and PBS. Pure.

Every file starts with comments that say how to submit it, what it needs from the cluster
(operator, Pod Security level, RDMA), which rendezvous it uses and the `invoke manifests`
line that regenerates it.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

import yaml

from . import hpc, kube
from torchpod.errors import InputError

from .spec import JobSpec, check

OPERATORS = {
    "volcano": "Volcano >= 1.9 (its env and svc job plugins)",
    "volcano-master": "Volcano >= 1.9 (its env, svc and pytorch job plugins)",
    "kubeflow": "Kubeflow training-operator >= 1.7 (PET_* variables)",
    "kubeflow-elastic": "Kubeflow training-operator >= 1.7 (elasticPolicy)",
    "trainer": "Kubeflow Trainer v2 with the torch-distributed ClusterTrainingRuntime",
    "runai": "Run:ai with its PyTorch (training-operator) support",
}


@dataclass(frozen=True)
class Output:
    name: str  # file name, no directory
    text: str


def invoke_line(spec: JobSpec) -> str:
    """The `invoke manifests` command that renders ``spec`` again."""
    argv = ["invoke", "manifests", "--scheduler", spec.scheduler, "--nodes", str(spec.nodes),
            "--gpus-per-node", str(spec.gpus_per_node), "--image", spec.image, "--name", spec.name]
    if spec.namespace != "default":
        argv += ["--namespace", spec.namespace]
    if spec.rdma != "none":
        argv += ["--rdma", spec.rdma]
    if spec.rdma_resource:
        argv += ["--rdma-resource", spec.rdma_resource]
    if spec.privileged:
        argv += ["--privileged"]
    if spec.preset:
        argv += ["--preset", spec.preset]
    if spec.rdzv != "c10d":
        argv += ["--rdzv", spec.rdzv]
        argv += ["--etcd-server"] if spec.etcd_server else ["--etcd-endpoint", spec.etcd_endpoint]
    if not spec.kube:
        argv += ["--runtime", spec.runtime]
    if spec.queue:
        argv += ["--queue", spec.queue]
    if not spec.kube and spec.walltime != "01:00:00":
        argv += ["--walltime", spec.walltime]
    if spec.scheduler == "runai" and spec.project != "team-a":
        argv += ["--project", spec.project]
    if spec.site_lib:
        argv += ["--site-lib", spec.site_lib]
    return " ".join(shlex.quote(a) for a in [*argv, "--", *spec.command])


def pod_security(spec: JobSpec) -> str:
    """The Pod Security Standards level the namespace must allow, and why."""
    reasons = []
    if spec.privileged:
        reasons.append("privileged: true")
    if spec.rdma == "hostnetwork":
        reasons.append("hostNetwork and a hostPath /dev/infiniband")
    if spec.fabric_binds():
        reasons.append("a hostPath for the EFA installer's /opt/amazon")
    if spec.rdma != "none":
        reasons.append("the IPC_LOCK capability")
    if reasons:
        return (f"'privileged' ({', '.join(reasons)}; 'baseline' allows none of them): label the namespace "
                "pod-security.kubernetes.io/enforce=privileged")
    return "'baseline' (no host namespaces, hostPath or added capabilities; not 'restricted': the image runs as root)"


def header(spec: JobSpec, filename: str) -> list[str]:
    gpus = f"{spec.gpus_per_node} GPUs" if spec.gpus_per_node else "CPU only"
    lines = [f"torchpod {spec.scheduler} job '{spec.name}': {spec.nodes} nodes x {gpus}, image {spec.image}"]
    if spec.kube:
        lines.append(f"Submit: kubectl apply -f {filename}   (needs {OPERATORS[spec.scheduler]})")
        lines.append(f"Pod Security: namespace level {pod_security(spec)}")
    elif spec.scheduler == "slurm":
        lines.append(f"Submit: sbatch {filename}   (container runtime: {spec.runtime})")
    else:
        lines.append(f"Submit: qsub {filename}   (container runtime: {spec.runtime}"
                     + ("; Cray PALS mpiexec)" if spec.scheduler == "pbs-pals" else "; pbsdsh)"))
    if spec.rdzv == "etcd":
        where = "the etcd Pod and Service in this file" if spec.etcd_server else "an etcd you run"
        lines.append(f"Rendezvous: etcd-v2 at {spec.etcd_endpoint} ({where}; it must serve the v2 API)")
    else:
        lines.append(f"Rendezvous: c10d on node 0, port {spec.port}; torchpod derives it from the scheduler")
    if spec.rdma == "hostnetwork":
        lines.append("RDMA: hostNetwork + /dev/infiniband from the host (OKE style); NICs and GIDs as the host has them")
    elif spec.rdma == "device-plugin":
        lines.append(f"RDMA: one {spec.rdma_resource} per pod from the RDMA device plugin; the NICs' netdevs must "
                     "reach the pod (e.g. a Multus secondary network)")
    if spec.privileged:
        lines.append("WARNING --privileged: every host device and capability is open to the container "
                     "(and AppArmor/seccomp are off); use it only to rule out a permissions problem")
    if spec.preset:
        lines.append(f"Fabric: TORCHPOD_PRESET={spec.preset}; the launcher applies that shape's NCCL settings")
    binds = spec.fabric_binds()
    if binds and (spec.kube or spec.runtime != "none"):
        lines.append("Net plugin: bound in from the host, where the launcher looks for it: "
                     + ", ".join(f"{h} -> {c}" for h, c in binds)
                     + ("; add the plugin's other dependencies under /opt/torchpod/site/deps"
                        if spec.fabric == "slingshot" else ""))
    lines.append(f"Regenerate: {invoke_line(spec)}")
    return ["# " + line for line in lines]


class _Dumper(yaml.SafeDumper):
    """Plain YAML: a shared template is written out in full, never as an &anchor."""

    def ignore_aliases(self, data) -> bool:
        return True


def _yaml(docs) -> str:
    return "---\n".join(yaml.dump(d, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120)
                         for d in docs)


def render(spec: JobSpec) -> list[Output]:
    """The files for ``spec`` (checked first: bad input raises before anything is built)."""
    spec = check(spec)
    base = f"{spec.name}.{spec.scheduler}"
    if spec.scheduler == "slurm":
        name = f"{base}.sbatch"
        return [Output(name, hpc.slurm_script(spec, header(spec, name)))]
    if spec.scheduler in ("pbs", "pbs-pals"):
        name = f"{base}.sh"
        return [Output(name, hpc.pbs_script(spec, header(spec, name)))]
    name = f"{base}.yaml"
    out = [Output(name, "\n".join(header(spec, name)) + "\n" + _yaml(kube.objects(spec)))]
    if spec.scheduler == "runai":
        sh = f"{base}.sh"
        cmd = kube.runai_command(spec)
        lines = ["#!/bin/sh", header(spec, sh)[0], header(spec, sh)[-1],
                 f"# The Run:ai CLI line for the job; {name} is the PyTorchJob it corresponds to.",
                 "# Flags as in the Run:ai CLI reference (`runai training pytorch submit`, v2.18+).",
                 "exec " + " \\\n  ".join(_chunks(cmd))]
        out.insert(0, Output(sh, "\n".join(lines) + "\n"))
    return out


def _chunks(argv: list[str]) -> list[str]:
    """Flag/value pairs on one line each, for a readable command."""
    i = next((k for k, a in enumerate(argv) if a.startswith("-")), len(argv))
    out = [" ".join(shlex.quote(a) for a in argv[:i])]
    while i < len(argv):
        a = argv[i]
        if a.startswith("-") and a != "--" and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            out.append(f"{shlex.quote(a)} {shlex.quote(argv[i + 1])}")
            i += 2
        elif a == "--":
            out.append(" ".join(shlex.quote(x) for x in argv[i:]))
            break
        else:
            out.append(shlex.quote(a))
            i += 1
    return out


def regenerate_line(text: str) -> str:
    """The `invoke manifests ...` line in a rendered file's header."""
    for line in text.splitlines():
        if line.startswith("# Regenerate: "):
            return line[len("# Regenerate: "):]
    raise InputError("no '# Regenerate: invoke manifests ...' line; expected a file `invoke manifests` wrote")


def parse_invoke_line(line: str) -> JobSpec:
    """The JobSpec an `invoke manifests` line asks for (the flags of tasks.py's manifests)."""
    import argparse

    argv = shlex.split(line)
    if argv[:2] != ["invoke", "manifests"]:
        raise InputError(f"{line!r} is not an `invoke manifests` line")
    argv = argv[2:]
    command: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, command = argv[:at], argv[at + 1:]
    p = argparse.ArgumentParser(prog="invoke manifests", add_help=False)
    for flag in ("--scheduler", "--image", "--name", "--namespace", "--rdma", "--rdma-resource", "--preset",
                 "--rdzv", "--etcd-endpoint", "--runtime", "--queue", "--walltime", "--project", "--site-lib"):
        p.add_argument(flag)
    p.add_argument("--nodes", type=int)
    p.add_argument("--gpus-per-node", type=int)
    p.add_argument("--privileged", action="store_true")
    p.add_argument("--etcd-server", action="store_true")
    ns = p.parse_args(argv)
    given = {k: v for k, v in vars(ns).items() if v not in (None, False)}
    return JobSpec(command=tuple(command), **given)
