"""The pods of a Kubeflow Trainer v2 TrainJob on the torch-distributed runtime, and what its
admission refuses. Pure.

Trainer v2 (kubeflow/trainer v2.3.0, commit 658725bd: pkg/runtime/framework/plugins/
torch/torch.go, jobset plugin; unchanged on master at 8c0f5059, and nothing v2.4.0's
release notes list touches it): the runtime's replicated job ``node`` -> pods
``<job>-node-0-<i>`` of an Indexed Job (JOB_COMPLETION_INDEX, annotation
batch.kubernetes.io/job-completion-index), subdomain = job; trainer.env, then PET_NNODES,
PET_NPROC_PER_NODE (trainer_nproc), PET_NODE_RANK (the completion index), PET_MASTER_ADDR
``<job>-node-0-0.<job>``, PET_MASTER_PORT (contract.TRAINER_PORT). What admission
refuses is refused here too (trainer_admitted): a name that is no DNS-1035 label of at
most 63 (the TrainJob's CEL rules), a last pod name over 63 with JobSet's 5-character
suffix (jobset v0.12.0 webhook), a PET_* variable in trainer.env (torch.go Validate).
"""

from __future__ import annotations

from typing import Sequence

from torchpod.contract import TRAINER_PORT
from torchpod.errors import InputError

from ... import grammars
from .common import K8S_ENV, Obj, Pod, last_wins, launcher_args, node_name, resolve

# What the torch plugin sets and so refuses in trainer.env (pkg/constants TorchRunReservedEnvNames).
TRAINER_RESERVED_ENV = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")
_TRAINJOB_NAME = grammars.DNS1035_LABEL  # the TrainJob's CEL rule


def _ceil_quantity(text) -> int:
    """A CPU or GPU quantity rounded up to a whole number, as resource.Quantity.Value() does:
    whole or decimal numbers and millis (``500m`` is 1); other suffixes are not modelled."""
    m = grammars.WHOLE_OR_MILLI.fullmatch(str(text))
    if m is None:
        raise InputError(f"resource quantity {text!r} is not modelled; expected a number or millis, e.g. 4 or 500m")
    whole, frac, milli = int(m.group(1)), m.group(2) or "", m.group(3)
    if milli:
        return -(-whole // 1000) if not frac else -(-(whole + 1) // 1000)
    return whole + (1 if frac.strip("0") else 0)


def trainer_nproc(trainer: Obj) -> str:
    """PET_NPROC_PER_NODE as the torch plugin sets it (torch.go EnforceMLPolicy): the
    TrainJob's numProcPerNode (an int32 since v2.2, which removed the runtime's), else
    ``auto``, which becomes the CPU count per node (at least 1) when resourcesPerNode asks
    for no GPU (runtime.GetNumGPUPerNode: the first resource whose name holds "gpu",
    requests before limits; getNumCPUPerNode: requests.cpu, else limits.cpu)."""
    given = trainer.get("numProcPerNode")
    if given is not None:
        if isinstance(given, bool) or not isinstance(given, int) or given < 1:
            raise InputError(f"TrainJob trainer.numProcPerNode {given!r}: expected a whole number >= 1 (an int32 "
                             "since Trainer v2.2; 'auto' is the default when it is left out)")
        return str(given)
    res = trainer.get("resourcesPerNode") or {}
    for part in ("requests", "limits"):
        gpus = [q for k, q in (res.get(part) or {}).items() if "gpu" in k.lower()]
        if gpus and _ceil_quantity(gpus[0]):
            return "auto"
    cpu = (res.get("requests") or {}).get("cpu") or (res.get("limits") or {}).get("cpu") or 0
    return str(max(1, _ceil_quantity(cpu)))


def trainer_admitted(name: str, trainer: Obj) -> None:
    """What the API server and the webhooks refuse about a TrainJob (see the docstring)."""
    if not _TRAINJOB_NAME.fullmatch(name) or len(name) > 63:
        raise InputError(f"TrainJob {name!r}: metadata.name must be a DNS-1035 label of at most 63 characters "
                         "(the TrainJob's CEL rules)")
    last = f"{name}-node-0-{int(trainer.get('numNodes', 1)) - 1}-abcde"
    if len(last) > 63:
        raise InputError(f"TrainJob {name}: its JobSet's longest pod name {last!r} is over 63 characters; "
                         "JobSet's webhook refuses it: expected a shorter name")
    reserved = sorted({e.get("name") for e in trainer.get("env") or ()} & set(TRAINER_RESERVED_ENV))
    if reserved:
        raise InputError(f"TrainJob {name}: trainer.env sets {', '.join(reserved)}, which the torch plugin sets; "
                         "Trainer's webhook refuses it: leave them out")


def trainjob(job: Obj, node_names: Sequence[str] = ()) -> list[Pod]:
    name, ns = job["metadata"]["name"], job["metadata"].get("namespace", "default")
    ref = job["spec"].get("runtimeRef", {})
    if ref.get("name") != "torch-distributed":
        raise InputError(f"TrainJob {name}: runtimeRef {ref.get('name')!r} is not modelled; expected torch-distributed")
    trainer = job["spec"].get("trainer") or {}
    trainer_admitted(name, trainer)
    n = int(trainer.get("numNodes", 1))
    nproc = trainer_nproc(trainer)
    master = f"{name}-node-0-0.{name}"
    pods = []
    for i in range(n):
        pod = f"{name}-node-0-{i}"
        annotations = {"batch.kubernetes.io/job-completion-index": str(i)}
        labels = {"jobset.sigs.k8s.io/jobset-name": name, "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
        node = node_names[i] if i < len(node_names) else node_name(i)
        env = list(K8S_ENV) + [("JOB_COMPLETION_INDEX", str(i))]
        env += resolve(trainer.get("env"), pod, ns, labels, annotations, node)
        env += [("PET_NNODES", str(n)), ("PET_NPROC_PER_NODE", str(nproc)), ("PET_NODE_RANK", str(i)),
                ("PET_MASTER_ADDR", master), ("PET_MASTER_PORT", str(TRAINER_PORT))]
        pods.append(Pod(name=pod, hostname=pod, dns_names=(f"{pod}.{name}",), env=last_wins(env),
                        args=launcher_args(trainer), image=trainer["image"],
                        labels=tuple(labels.items())))
    return pods
