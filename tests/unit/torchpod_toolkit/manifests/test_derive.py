"""torchpod_toolkit.manifests.derive: the operator models derived from the recordings of what
the real operators made (manifests/recorded/, recorded afresh in the cluster tier by
tests/kube_records.py). Each recording is reproduced by its derived model; the derivation
finds the quantities behind a value and refuses what no template fits; the model refuses a
job its recordings cannot speak for."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from torchpod.errors import InputError
from torchpod_toolkit.manifests import derive, kube, operators, shapes
from torchpod_toolkit.manifests.models import runai
from torchpod_toolkit.manifests.models.common import resolve
from torchpod_toolkit.manifests.spec import JobSpec, check

from manifest_cases import IMAGE

RECORDED = sorted(path.stem for path in derive.RECORDED.glob("*.json"))
MASKS = re.compile(r"\{(random|uid|hash)\}")


def _recordings():
    for kind in RECORDED:
        for n, recording in enumerate(derive.recorded(kind)["recordings"]):
            yield pytest.param(recording, id=f"{kind}-{n}")


def test_every_kubernetes_kind_with_a_real_operator_has_a_recording():
    from torchpod_toolkit.manifests import jobs

    # a kind whose pods the harness cannot run (Run:ai's scheduler) says so on its record
    assert {k.name for k in jobs.KINDS if k.kube and not k.no_kube_harness} <= set(RECORDED)


@pytest.mark.parametrize("recording", list(_recordings()))
def test_each_recorded_job_is_what_its_derived_model_makes_of_it(recording):
    """The model applied to the recorded job gives every recorded pod: its name (a masked part
    given a stand-in), hostname, each label and annotation, each variable (a fieldRef as the
    kubelet resolves it) and each file; what is masked is left out."""
    job = derive.job_object(recording["objects"])
    shape = shapes.SHAPES[(job["apiVersion"], job["kind"])](job)
    made = operators.pods(recording["objects"])
    assert len(made) == len(shape.slots) == len(recording["pods"])
    for slot, model in zip(shape.slots, made):
        pod = derive._recorded_pod(slot, recording["pods"], job)
        assert re.fullmatch(re.escape(pod["name"]).replace(r"\{random\}", "[0-9a-f]{5}"), model.name), model.name
        assert model.hostname == (pod["hostname"] or model.name)
        labels, annotations = dict(model.labels), pod["annotations"]
        assert {k: labels.get(k) for k, v in pod["labels"].items() if not MASKS.search(v)} == \
            {k: v for k, v in pod["labels"].items() if not MASKS.search(v)}
        env = dict(resolve(pod["env"], model.name, job["metadata"].get("namespace", "default"), labels, annotations,
                           "node-a"))
        assert {k: model.env_dict.get(k) for k, v in env.items() if not MASKS.search(v)} == \
            {k: v for k, v in env.items() if not MASKS.search(v)}
        assert dict(model.files) == pod["files"]
        if pod["subdomain"]:
            assert model.dns_names[0] == f"{model.hostname}.{pod['subdomain']}"


def _job(kind: str, nodes="3", **fields):
    return kube.objects(check(JobSpec(kind, nodes, IMAGE, ("train.py",), **fields)))


@pytest.mark.parametrize("kind, change, needle", [
    # a plugin argument the recordings never had
    ("volcano", lambda j: j["spec"]["plugins"].update(svc=["--disable-network-policy=true"]),
     r"its shape \(plugins, env:, svc:--disable-network-policy=true\) was never recorded; expected one of: "),
    ("volcano", lambda j: j["spec"]["tasks"][0].update(name="ps"), "role ps was never recorded; expected worker"),
    # the recordings saw one group alone: a group's size and the job's total were never apart
    ("lws", lambda j: j["spec"].update(replicas=2), "by the recordings, which never saw a job where these differ"),
    ("trainer", lambda j: j["spec"]["trainer"].pop("numProcPerNode"),
     r"trainer.numProcPerNode is not set; expected a whole number"),
    ("jobset", lambda j: j["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
     .setdefault("env", []).append({"name": "JOB_COMPLETION_INDEX", "value": "0"}),
     "the container sets JOB_COMPLETION_INDEX, which the operator sets"),
])
def test_a_job_its_recordings_cannot_speak_for_is_refused_in_one_line(kind, change, needle):
    docs = copy.deepcopy(_job(kind))
    change(derive.job_object(docs))
    with pytest.raises(InputError, match=needle) as caught:
        operators.pods(docs)
    assert "\n" not in str(caught.value) and "Traceback" not in str(caught.value)


@pytest.mark.parametrize("nodes, gpus", [("2", 8), ("7", 1), ("5", 0)])
def test_a_torchpod_render_of_any_size_is_modelled_without_refusal(nodes, gpus):
    """What torchpod renders (any size, any GPU count) is a shape the recordings speak for:
    a pod per node, their names distinct."""
    for kind in ("volcano", "volcano-master", "kubeflow", "kubeflow-elastic", "runai", "trainer", "lws", "jobset"):
        pods = operators.pods(_job(kind, nodes, gpus_per_node=gpus))
        assert len({p.name for p in pods}) == len(pods) == int(nodes), kind


def test_the_recordings_say_what_the_operators_wrote_and_a_shape_says_no_more_than_counts():
    """A recording holds pods as read from the API server, masked; the shapes module names no
    variable, label value or hostname the operators write."""
    text = derive.RECORDED.joinpath("jobset.json").read_text()
    assert "{random}" in text and "{uid}" in text
    source = Path(shapes.__file__).read_text()
    for written in ("MASTER_ADDR", "PET_", "VC_", "LWS_LEADER", "subdomain\": "):
        assert written not in source, written
    assert all(json.loads(derive.RECORDED.joinpath(f"{kind}.json").read_text())["kind"] == kind for kind in RECORDED)


def test_no_operator_model_is_written_by_hand_but_run_ais():
    """What CONTRIBUTING.md says: the models folder holds Kubernetes' own behaviour (common)
    and Run:ai's variables alone; every other model is derived from recordings."""
    from torchpod_toolkit.manifests import models

    folder = Path(models.__file__).parent
    assert sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__") == ["common", "runai"]
    assert set(operators.MODELS) == set(shapes.SHAPES)
    hand_written = {m.__module__ for m in operators.MODELS.values() if not isinstance(m, derive.Operator)}
    assert hand_written == {runai.__name__}


@pytest.mark.parametrize("text, needle", [
    ('{"kind": "jobset", "recordings": [', "not JSON"),
    ('["jobset"]', "its kind is None, not 'jobset'"),
    ('{"kind": "lws", "recordings": [{"objects": [], "pods": []}]}', "its kind is 'lws', not 'jobset'"),
    ('{"kind": "jobset", "recordings": []}', "it holds no recordings"),
    ('{"kind": "jobset", "recordings": [{"objects": [{}]}]}', "recording 0 has no objects and pods lists"),
    ('{"kind": "jobset", "recordings": [{"objects": [], "pods": [{"name": "p"}]}]}',
     "a pod of recording 0 has ['name'], not the recorder's"),
    ('{"kind": "jobset", "recordings": [{"objects": [], "pods": [7]}]}', "a pod of recording 0 has int"),
])
def test_a_recording_not_in_the_recorders_form_is_one_line_naming_the_file(tmp_path, text, needle):
    (tmp_path / "jobset.json").write_text(text)
    with pytest.raises(InputError, match=re.escape(needle)) as caught:
        derive.recorded("jobset", tmp_path)
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'jobset.json'}: ") and "\n" not in message
    assert "tests/kube_records.py" in message


def test_every_committed_recording_is_in_the_recorders_form():
    for kind in RECORDED:
        assert derive.recorded(kind)["recordings"], kind
