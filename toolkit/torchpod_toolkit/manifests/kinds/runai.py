"""Run:ai with its PyTorch (training-operator) support: the pods are a PyTorchJob's plus
RUNAI_JOB_NAME (models/runai.py), and render.py writes the `runai training pytorch
submit` line beside the PyTorchJob.

That CLI line is the file Run:ai submits, and it has no flag for a service account, a pull
secret, a priority class or a resource claim (the Run:ai CLI reference torchpod follows), so
this kind takes none of the pod fields and no --mnnvl.
"""

from __future__ import annotations

from torchpod.contract import PYTORCHJOB_PORT

from ..operators import PYTORCHJOB
from .record import JobKind, Ref

KIND = JobKind("runai", "runai", PYTORCHJOB_PORT, "runai", PYTORCHJOB,
               "Run:ai with its PyTorch (training-operator) support", "kubectl apply -f", "yaml",
               Ref("kube", "runai_job"),
               marker="RUNAI_JOB_NAME", project=True,
               no_mnnvl="the `runai training pytorch submit` line written beside the PyTorchJob has no flag for a "
                        "resource claim, so its pods would get no IMEX channel; use --scheduler kubeflow, the same "
                        "PyTorchJob",
               cli=Ref("kube", "RUNAI_CLI"),
               no_kube_harness="a Run:ai job: its pods name runai-scheduler, which no module here builds (a Run:ai "
                               "job runs without --kube, on the operator model)",
               restarts="a failed container restarts in place (restartPolicy OnFailure) until the job's pods have "
                        "restarted {n} times in all (runPolicy.backoffLimit), then the PyTorchJob is Failed",
               piped="kubectl apply -f -",
               watch="kubectl -n {namespace} get pytorchjobs.kubeflow.org {name} -w",
               order=60)
