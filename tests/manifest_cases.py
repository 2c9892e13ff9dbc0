"""The job requests the manifest tests render (tests/unit/torchpod_toolkit/manifests/): one
spec per job kind and variant, and the YAML documents a spec renders to."""

from __future__ import annotations

import yaml

from torchpod_toolkit.manifests import jobs
from torchpod_toolkit.manifests.render import printed, render
from torchpod_toolkit.manifests.spec import HPC, KUBE, MNNVL_KINDS, NODE_RANGE_KINDS, JobSpec
from torchpod_toolkit.manifests.spec import options as spec_options

IMAGE = "registry.example.com/torchpod/pytorch:2.13.0-cuda13.0"
SITE_LIB_HOST = "/home/user/software/aws-ofi-nccl-1.14.0/lib"


def _specs() -> list[JobSpec]:
    """Every job kind in its variants: RDMA modes, etcd, CPU-only, presets, each HPC runtime."""
    out = []
    for sched in KUBE:
        for rdma in ("none", "hostnetwork", "device-plugin"):
            if sched == "trainer" and rdma == "hostnetwork":
                continue
            resource = "rdma/rdma_shared_device_a" if rdma == "device-plugin" else ""
            out.append(JobSpec(sched, 3, IMAGE, ("train.py", "--epochs", "2"), rdma=rdma, rdma_resource=resource,
                               preset="oci-bm-gpu-h100.8" if rdma == "hostnetwork" else ""))
        out.append(JobSpec(sched, 2, IMAGE, ("train.py",), name="etcdjob", rdzv="etcd", etcd_server=True))
        out.append(JobSpec(sched, 2, IMAGE, ("train.py",), name="cpujob", gpus_per_node=0,
                           rdzv="etcd", etcd_endpoint="etcd.infra:2379"))
    for sched in NODE_RANGE_KINDS:  # elastic (--nodes 2:3): runs on 2 of its 3 pods
        out.append(JobSpec(sched, "2:3", IMAGE, ("train.py",), name="elastic", gpus_per_node=0))
    out.append(JobSpec("kubeflow", 2, IMAGE, ("train.py",), name="efajob", preset="aws-p5", rdma="device-plugin",
                       rdma_resource="vpc.amazonaws.com/efa"))
    for sched in MNNVL_KINDS:  # GB200 (--mnnvl): a ComputeDomain, and every pod claims its channel
        out.append(JobSpec(sched, 3, IMAGE, ("train.py",), name="gb200", gpus_per_node=4, mnnvl=True))
    for sched in HPC:
        for runtime in jobs.kind(sched).runtimes or ("apptainer", "enroot", "podman", "docker", "none"):
            out.append(JobSpec(sched, 2, IMAGE, ("train.py", "--lr", "1e-3"), runtime=runtime, gpus_per_node=4,
                               preset="hpe-slingshot-gh200" if sched == "pbs-pals" else "",
                               site_lib=SITE_LIB_HOST if sched == "pbs-pals" and runtime != "none" else ""))
    out.append(JobSpec("slurm", 2, IMAGE, ("train.py",), name="efajob", runtime="apptainer", preset="aws-p5"))
    taken = {name: how.kinds for name, how in spec_options()}
    for sched in (*KUBE, *HPC):  # what a site asks of every job, where the kind can say it
        fields = {k: v for k, v in SITE_FIELDS.items() if taken[k] is None or sched in taken[k]}
        if sched in KUBE and "volume" in fields:  # a pod takes every source; a batch job a host path
            fields["volume"] = (*fields["volume"], "pvc:checkpoints:/ckpt", "configmap:train-code:/workspace")
        out.append(JobSpec(sched, 2, IMAGE, ("train.py",), name="site", cpus_per_node=24, memory_per_node="200Gi",
                           runtime="none" if sched == "skypilot" else "", **fields))
    return out


# A value for each site option (account, QoS, ..., the job's environment).
SITE_FIELDS = {"account": "proj-7", "qos": "high", "constraint": "h100&ib", "reservation": "maint",
               "service_account": "trainer", "priority_class": "training-high", "image_pull_secret": "regcred",
               "env": ("NCCL_DEBUG=INFO", "NCCL_IB_HCA=mlx5_0,mlx5_1"),
               "volume": ("hostpath:/scratch/datasets:/data:ro",), "workdir": "/workspace",
               "node_selector": ("nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3",),
               "toleration": ("nvidia.com/gpu:NoSchedule", "dedicated=ml:NoExecute")}


SPECS = _specs()
KUBE_SPECS = [s for s in SPECS if s.kube]


def spec_id(s: JobSpec) -> str:
    """A test id naming what differs between the specs."""
    return f"{s.scheduler}-{s.name}-{s.rdma}-{s.rdzv}-{s.runtime or 'k8s'}"


def documents(spec: JobSpec) -> list[dict]:
    """The YAML documents ``invoke manifests`` writes for ``spec``."""
    out = render(spec)
    return [d for o in out if o.name.endswith(".yaml") for d in yaml.safe_load_all(o.text) if d]


def job_file(scheduler: str, nodes: int | str = 2, **fields) -> str:
    """The job's own file (what `invoke manifests` prints without --out) for ``scheduler``."""
    return printed(render(JobSpec(scheduler, nodes, IMAGE, ("train.py",), **fields)))[0]


def job_object(scheduler: str, nodes: int | str = 2, **fields) -> dict:
    """The training job's object (the last document) of a Kubernetes kind's file."""
    return [d for d in yaml.safe_load_all(job_file(scheduler, nodes, **fields)) if d][-1]
