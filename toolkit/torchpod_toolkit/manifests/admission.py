"""What the API server and the operators' webhooks refuse about a job object, refused here
before a model makes its pods (`invoke demo --manifest` runs no control plane). Pure.

These are refusals, not pods: the pods come from what the operators did, recorded
(derive.py). tests/cluster/test_kube_operators.py holds the reserved-variable and
minAvailable refusals to the real webhooks' on the same spoilt render; the name-length
rules rest on the sources cited:

- TrainJob (kubeflow/trainer v2.3.0, commit 658725bd): metadata.name a DNS-1035 label of
  at most 63 characters (the TrainJob's CEL rules); its JobSet's longest pod name
  ``<job>-node-0-<last>`` with the Job's 5-character suffix within 63 (jobset v0.12.0
  webhook); no PET_* variable the torch plugin sets in trainer.env (pkg/runtime/framework/
  plugins/torch/torch.go Validate, pkg/constants TorchRunReservedEnvNames).
- Volcano Job (volcano-sh/volcano ed72c7c8, pkg/webhooks/admission/jobs/validate/
  admit_job.go): minAvailable at most the replicas of all tasks, and a task's at most its
  replicas.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from torchpod.errors import InputError

from .. import grammars

Obj = Mapping[str, Any]

TRAINER_RESERVED_ENV = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")
_TRAINJOB_NAME = grammars.DNS1035_LABEL  # the TrainJob's CEL rule


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


def _trainjob(job: Obj) -> None:
    trainer_admitted(job["metadata"]["name"], job["spec"].get("trainer") or {})


def _volcano(job: Obj) -> None:
    """What Volcano's admission webhook refuses about minAvailable (admit_job.go)."""
    name, spec = job["metadata"]["name"], job["spec"]
    total = sum(int(t["replicas"]) for t in spec["tasks"])
    if int(spec.get("minAvailable") or 0) > total:
        raise InputError(f"Volcano Job {name}: minAvailable {spec['minAvailable']} is above the {total} replicas "
                         "of its tasks; expected at most the replicas (the admission webhook refuses it)")
    for t in spec["tasks"]:
        if t.get("minAvailable") is not None and int(t["minAvailable"]) > int(t["replicas"]):
            raise InputError(f"Volcano Job {name}: task {t['name']} minAvailable {t['minAvailable']} is above its "
                             f"{t['replicas']} replicas; expected at most the replicas")


RULES: Mapping[tuple[str, str], Callable[[Obj], None]] = {
    ("trainer.kubeflow.org/v1alpha1", "TrainJob"): _trainjob,
    ("batch.volcano.sh/v1alpha1", "Job"): _volcano,
}


def admitted(job: Obj) -> None:
    """Refuses ``job`` as its admission would; a kind without rules here passes."""
    rule = RULES.get((job["apiVersion"], job["kind"]))
    if rule is not None:
        rule(job)
