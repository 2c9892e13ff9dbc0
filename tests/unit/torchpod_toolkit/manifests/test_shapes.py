"""torchpod_toolkit.manifests.shapes: which pods each operator makes of a job object, by role
and index, and what of the object changes what the operator writes (the signature)."""

from __future__ import annotations

import copy
import re

import pytest

from torchpod.errors import InputError
from torchpod_toolkit.manifests import derive, kube, shapes
from torchpod_toolkit.manifests.spec import JobSpec, check

from manifest_cases import IMAGE


def _job(kind, nodes="3", **fields):
    return copy.deepcopy(derive.job_object(kube.objects(check(JobSpec(kind, nodes, IMAGE, ("t.py",), **fields)))))


def _shape(job):
    return shapes.SHAPES[(job["apiVersion"], job["kind"])](job)


@pytest.mark.parametrize("kind, nodes, roles", [
    ("volcano-master", "3", [("master", 0), ("worker", 0), ("worker", 1)]),
    ("kubeflow", "3", [("Master", 0), ("Worker", 0), ("Worker", 1)]),
    ("kubeflow-elastic", "2:3", [("Worker", 0), ("Worker", 1), ("Worker", 2)]),
    ("lws", "3", [("leader", 0), ("worker", 1), ("worker", 2)]),
    ("jobset", "2", [("node", 0), ("node", 1)]),
    ("trainer", "2", [("node", 0), ("node", 1)]),
])
def test_each_pod_has_its_role_index_and_the_jobs_counts(kind, nodes, roles):
    shape = _shape(_job(kind, nodes))
    assert [(s.role, s.numbers["index"]) for s in shape.slots] == roles
    assert [s.numbers["global"] for s in shape.slots] == list(range(len(roles)))
    assert {s.numbers["total"] for s in shape.slots} == {len(roles)}
    assert all(s.identity for s in shape.slots)


def test_each_lws_pod_is_found_by_its_group_and_worker_index_the_leader_worker_0():
    job = _job("lws", "3")
    job["spec"]["replicas"] = 2
    marks = [dict((k, v) for _, k, v in s.identity) for s in _shape(job).slots]
    assert [(m[f"{shapes.LWS}group-index"], m[f"{shapes.LWS}worker-index"]) for m in marks] == [
        ("0", "0"), ("0", "1"), ("0", "2"), ("1", "0"), ("1", "1"), ("1", "2")]


def test_the_signature_names_what_changes_the_operators_pods_and_not_the_counts():
    assert _shape(_job("volcano", "2")).signature == _shape(_job("volcano", "5:7")).signature
    elastic, fixed = _shape(_job("kubeflow-elastic", "2:3")), _shape(_job("kubeflow", "3"))
    assert elastic.signature[0] == "elastic" and fixed.signature == ("fixed",)


@pytest.mark.parametrize("kind, change, needle", [
    ("kubeflow", lambda j: j["spec"].update(nprocPerNode="auto"), "nprocPerNode 'auto': expected a whole number"),
    ("kubeflow", lambda j: j["spec"]["pytorchReplicaSpecs"].update(Chief={}), "expected Master and Worker"),
    ("jobset", lambda j: j["spec"]["replicatedJobs"][0]["template"]["spec"].update(parallelism=1, completions=3),
     "parallelism 1 is not its completions 3"),
    ("volcano", lambda j: j["spec"]["tasks"][0].update(replicas="two"), "task worker replicas 'two'"),
    ("lws", lambda j: j["spec"]["leaderWorkerTemplate"].update(size=True), "size True: expected a whole number"),
])
def test_a_count_the_operator_would_not_read_is_refused_in_one_line(kind, change, needle):
    job = _job(kind)
    change(job)
    with pytest.raises(InputError, match=re.escape(needle)):
        _shape(job)
