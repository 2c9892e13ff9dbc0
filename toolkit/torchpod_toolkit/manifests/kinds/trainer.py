"""Kubeflow Trainer v2's TrainJob on the torch-distributed ClusterTrainingRuntime, whose
port is TRAINER_PORT.

What a TrainJob cannot say (trainer v2.3 CRD): its runtimePatches take no priorityClassName
and no workingDir (PodSpecPatch), and no resourceClaims, so no --mnnvl (kubeflow/trainer
v2.3.0, pkg/apis/trainer/v1alpha1/trainjob_types.go; KEP-2782 proposes one), and no
hostNetwork.

Its pods are <name>-node-0-<i> (the torch-distributed runtime's replicated job "node", one
Job of numNodes pods, as recorded: recorded/trainer.json), and JobSet's webhook holds the longest of them,
with its suffix, to a DNS label (spec.pod_name_room).
"""

from __future__ import annotations

from torchpod.contract import TRAINER_PORT

from ..operators import TRAINJOB
from .record import JobKind, Ref

KIND = JobKind("trainer", "kubeflow", TRAINER_PORT, "trainer", TRAINJOB,
               "Kubeflow Trainer v2 with the torch-distributed ClusterTrainingRuntime", "kubectl apply -f", "yaml",
               Ref("kube", "train_job"), pod_fields=True,
               no_mnnvl="a TrainJob cannot give its pods a resource claim (Trainer v2.3's runtimePatches have no "
                        "resourceClaims); use --scheduler jobset, the JobSet a TrainJob makes, or a TrainingRuntime "
                        "whose template claims the channel",
               no_hostnetwork="a TrainJob's runtimePatches cannot set hostNetwork (trainer v2.3 CRD); use --rdma "
                              "device-plugin, or another scheduler",
               last_pod="{name}-node-0-{index}",
               restarts="a failed container restarts in place until its Job has seen 6 failures (the "
                        "torch-distributed runtime's Job sets no backoffLimit: Kubernetes' default is 6, and a "
                        "TrainJob cannot change it), then the TrainJob is Failed",
               piped="kubectl apply -f -",
               watch="kubectl -n {namespace} get trainjobs.trainer.kubeflow.org {name} -w",
               order=50)
