"""torchpod_toolkit.manifests.models.runai: Run:ai's PyTorchJob, training-operator's pods
(derived from its recordings) with Run:ai's variables, the one hand-written model."""

from __future__ import annotations

import pytest

from torchpod.errors import InputError
from torchpod_toolkit.manifests import kube
from torchpod_toolkit.manifests.models.runai import RUNAI_SCHEDULER, pytorchjob
from torchpod_toolkit.manifests.spec import JobSpec, check

from manifest_cases import IMAGE


def test_a_container_whose_command_is_not_torchpod_is_refused_by_the_model():
    """The model's pods run the image's torchpod: a manifest whose container runs anything
    else is one line, never modelled as torchpod."""
    job = kube.pytorch_job_fixed(check(JobSpec("kubeflow", 2, IMAGE, ("train.py",))))
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        replica["template"]["spec"]["containers"][0]["command"] = ["python3"]
    with pytest.raises(InputError, match=r"command \['python3'\] is not modelled"):
        pytorchjob(job)


def test_a_runai_job_is_a_pytorchjob_whose_pods_carry_the_jobs_runai_variables():
    """Run:ai's pods are the PyTorchJob's under runai-scheduler, plus the job's name, UID and
    project; a PyTorchJob under the default scheduler gets none of them."""
    spec = check(JobSpec("runai", 2, IMAGE, ("train.py",), name="rj", project="team-b"))
    job = kube.runai_job(spec)
    assert {tmpl["template"]["spec"]["schedulerName"] for tmpl in job["spec"]["pytorchReplicaSpecs"].values()} \
        == {RUNAI_SCHEDULER}
    pods = pytorchjob(job)
    assert [p.name for p in pods] == ["rj-master-0", "rj-worker-0"]
    assert {(p.env_dict["RUNAI_JOB_NAME"], p.env_dict["RUNAI_PROJECT"]) for p in pods} == {("rj", "team-b")}
    assert len({p.env_dict["RUNAI_JOB_UUID"] for p in pods}) == 1
    plain = pytorchjob(kube.pytorch_job_fixed(check(JobSpec("kubeflow", 2, IMAGE, ("train.py",), name="rj"))))
    assert not [k for p in plain for k in p.env_dict if k.startswith("RUNAI_")]
    assert [p.env_dict["MASTER_ADDR"] for p in pods] == [p.env_dict["MASTER_ADDR"] for p in plain]
