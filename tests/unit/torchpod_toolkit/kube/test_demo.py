"""torchpod_toolkit.kube.demo without a plane: which manifests it takes and what it reads from
them (every Kubernetes worked example in manifests/), how each kind's end is read from its
status, the pods' lines and the closing table; bad manifests refused in one line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from torchpod.errors import InputError
from torchpod_toolkit.kube import demo
from torchpod_toolkit.kube.podruntime import Ended

from paths import ROOT

EXAMPLES = {
    "jobset/train.jobset.yaml": ("jobset", ("jobset",)),
    "kubeflow/train.kubeflow.yaml": ("kubeflow", ("training-operator",)),
    "kubeflow/train.kubeflow-elastic.yaml": ("kubeflow-elastic", ("training-operator",)),
    "kubeflow/gb200.kubeflow.yaml": ("kubeflow", ("training-operator",)),
    "lws/train.lws.yaml": ("lws", ("lws",)),
    "trainer/train.trainer.yaml": ("trainer", ("jobset", "trainer")),
    "volcano/train.volcano.yaml": ("volcano", ("volcano",)),
    "volcano/train.volcano-master.yaml": ("volcano-master", ("volcano",)),
    "volcano/train-etcd.volcano.yaml": ("volcano", ("volcano",)),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_kubernetes_worked_example_is_read_with_its_kind_nodes_level_and_images(name):
    found = demo.read_manifest(ROOT / "manifests" / name)
    scheduler, needs = EXAMPLES[name]
    assert (found.scheduler, found.kind.operators) == (scheduler, needs)
    text = (ROOT / "manifests" / name).read_text()
    assert f"{found.nodes} nodes" in text.splitlines()[0]
    assert f"namespace level '{found.level}'" in text
    assert found.images and all(ref in text for ref in found.images)
    assert "alpine:3.10" not in found.images  # training-operator's init container: the operator's, not the job's


def test_every_kubernetes_worked_example_is_covered():
    kube = {str(p.relative_to(ROOT / "manifests")) for p in (ROOT / "manifests").rglob("*.yaml")
            if p.parent.name not in ("skypilot", "runai")}
    assert kube == set(EXAMPLES)


def _write(tmp_path, text: str, name: str = "m.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


HEADER = "# torchpod jobset job 'x': 2 nodes x CPU only, image i:1\n# Pod Security: namespace level 'restricted' (ok)\n"
JOBSET = "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: x}\nspec: {}\n"


@pytest.mark.parametrize("text, needle", [
    ("", "has no torchpod header"),
    (JOBSET, "has no torchpod header"),
    (HEADER + "a: [1,\n", "cannot be read as YAML"),
    (HEADER + "- 1\n- 2\n", "holds a document that is not an object"),
    (HEADER + "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n", "holds 0 job objects"),
    (HEADER + JOBSET + "---\n" + JOBSET, "holds 2 job objects"),
    (HEADER.replace("jobset job", "runai job") + JOBSET, "is a Run:ai job: its pods name runai-scheduler, which no "
     "module here builds (a Run:ai job runs without --kube, on the operator model); expected a volcano, "
     "volcano-master, kubeflow, kubeflow-elastic, trainer, lws or jobset manifest"),
    (HEADER + "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n", "holds 0 job objects"),
])
def test_a_manifest_it_cannot_run_is_refused_in_one_line(tmp_path, text, needle):
    with pytest.raises(InputError) as info:
        demo.read_manifest(_write(tmp_path, text))
    assert needle in str(info.value) and "\n" not in str(info.value)
    assert str(info.value).startswith("--manifest=")


def test_a_missing_file_a_folder_binary_bytes_a_huge_file_a_fifo_and_a_device_are_refused(tmp_path):
    binary = tmp_path / "b.yaml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    huge = tmp_path / "h.yaml"
    huge.write_bytes(b"#" * (demo.MAX_BYTES + 1))
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)  # no writer: an open or read that waited on it would never return
    for path, needle in ((tmp_path / "absent.yaml", "cannot be read"), (tmp_path, "is a directory"),
                         (binary, "not UTF-8"), (huge, "over the 4 MiB cap"), (fifo, "is a FIFO"),
                         (Path("/dev/zero"), "is a character device"),
                         (tmp_path / "a\nb\x1b[2J.yaml", "cannot be read")):  # control characters, quoted
        with pytest.raises(InputError, match=needle) as info:
            demo.read_manifest(path)
        assert str(info.value).startswith("--manifest=") and "\n" not in str(info.value)


def test_the_namespace_is_the_job_objects_or_default(tmp_path):
    assert demo.read_manifest(_write(tmp_path, HEADER + JOBSET)).namespace == "default"
    placed = JOBSET.replace("{name: x}", "{name: x, namespace: team-a}")
    assert demo.read_manifest(_write(tmp_path, HEADER + placed)).namespace == "team-a"


def _cond(kind: str, status: str = "True") -> dict:
    return {"status": {"conditions": [{"type": kind, "status": status}]}}


def _pod(name: str, *states: dict, phase: str = "Running", node: str = "node-0") -> dict:
    return {"metadata": {"name": name}, "spec": {"nodeName": node},
            "status": {"phase": phase, "containerStatuses": [{"name": "pytorch", **s} for s in states]}}


EXITED_0 = {"state": {"terminated": {"exitCode": 0}}}
RESTARTED_AFTER_0 = {"state": {"running": {}}, "lastState": {"terminated": {"exitCode": 0}}}
RUNNING = {"state": {"running": {}}}


@pytest.mark.parametrize("key, job, pods, expected", [
    (("kubeflow.org", "PyTorchJob"), _cond("Succeeded"), [], "succeeded"),
    (("kubeflow.org", "PyTorchJob"), _cond("Failed"), [], "failed"),
    (("kubeflow.org", "PyTorchJob"), _cond("Succeeded", "False"), [], None),
    (("kubeflow.org", "PyTorchJob"), {}, [], None),
    (("jobset.x-k8s.io", "JobSet"), _cond("Completed"), [], "succeeded"),
    (("trainer.kubeflow.org", "TrainJob"), _cond("Complete"), [], "succeeded"),
    (("trainer.kubeflow.org", "TrainJob"), _cond("Failed"), [], "failed"),
    (("batch.volcano.sh", "Job"), {"status": {"state": {"phase": "Completed"}}}, [], "succeeded"),
    (("batch.volcano.sh", "Job"), {"status": {"state": {"phase": "Aborted"}}}, [], "failed"),
    (("batch.volcano.sh", "Job"), {"status": {"state": {"phase": "Running"}}}, [], None),
    (("leaderworkerset.x-k8s.io", "LeaderWorkerSet"), {}, [_pod("a", EXITED_0), _pod("b", RESTARTED_AFTER_0)],
     "succeeded"),
    (("leaderworkerset.x-k8s.io", "LeaderWorkerSet"), {}, [_pod("a", EXITED_0), _pod("b", RUNNING)], None),
    (("leaderworkerset.x-k8s.io", "LeaderWorkerSet"), {}, [], None),
])
def test_each_kind_ends_on_its_own_condition(key, job, pods, expected):
    assert demo.KINDS[key].ended(job, pods) == expected


def test_a_pods_line_names_its_phase_node_and_containers():
    waiting = {"state": {"waiting": {"reason": "CreateContainerConfigError", "message": 'secret "s" not found'}}}
    assert demo.pod_line(_pod("p", waiting, phase="Pending")) == \
        'pod p: Pending on node-0 (pytorch waiting: CreateContainerConfigError secret "s" not found)'
    assert demo.pod_line({"metadata": {"name": "q"}, "spec": {}}) == "pod q: Pending on no node yet"


def test_the_table_shows_each_pods_exits_and_the_ranks_its_successful_run_reported():
    log = 'TORCHPOD_RESULT {"workload": "allreduce_check", "rank": 1, "world_size": 2}\n'
    attempts = [Ended("ns", "p-1", "pytorch", "k8s_pytorch_p-1_ns_u_0", 1, "boom"),
                Ended("ns", "p-1", "pytorch", "k8s_pytorch_p-1_ns_u_1", 0, log),
                Ended("ns", "p-0", "pytorch", "k8s_pytorch_p-0_ns_u_0", None, "")]
    rows = demo.table([_pod("p-1", EXITED_0, phase="Succeeded"), _pod("p-0", RUNNING)], attempts)
    assert rows[0].split() == ["pod", "node", "phase", "restarts", "exits", "ranks"]
    assert rows[2].split() == ["p-0", "node-0", "Running", "0", "running", "-"]
    assert rows[3].split() == ["p-1", "node-0", "Succeeded", "0", "1,0", "1"]


def test_the_closing_line_says_whether_the_ranks_parameters_agree():
    same = [{"param_checksum": 1.5, "final_loss": 2.0}, {"param_checksum": 1.5000000001, "final_loss": 2.0}]
    assert demo._agreement(same) == "; final loss 2.0000; the ranks' parameters agree"
    assert demo._agreement([{"param_checksum": 1.5}, {"param_checksum": 2.5}]).endswith("parameters DIFFER")
    assert demo._agreement([{"rank": 0}]) == ""


def test_a_failed_jobs_deleted_pods_keep_their_rows_and_their_last_lines():
    # training-operator deletes a failed job's running pods (its clean-pod policy): the runs stay
    attempts = [Ended("ns", "pt-master-0", "pytorch", "k8s_pytorch_pt-master-0_ns_u_0", 1,
                      "starting\nValueError: bad learning rate\n\n"),
                Ended("ns", "pt-worker-0", "init-pytorch", "k8s_init-pytorch_pt-worker-0_ns_u_0", 0, "ok"),
                Ended("ns", "pt-worker-0", "pytorch", "k8s_pytorch_pt-worker-0_ns_u_0", 137, "")]
    rows = demo.table([], attempts)
    assert [r.split() for r in rows[2:]] == [["pt-master-0", "-", "deleted", "-", "1", "-"],
                                             ["pt-worker-0", "-", "deleted", "-", "137", "-"]]
    assert demo.last_lines(attempts) == ["  pt-master-0 (exit 1): ValueError: bad learning rate",
                                         "  pt-worker-0 (exit 137): (no output)"]


def test_the_namespace_is_created_only_where_it_is_not_there_yet():
    calls: list[tuple[str, ...]] = []
    there = {"kubeflow"}

    def kubectl(*args: str) -> str:
        calls.append(args)
        if args[:2] == ("get", "namespace"):
            return f"namespace/{args[-1]}\n" if args[-1] in there else ""
        return "serviceaccount/default\n"

    for namespace in ("kubeflow", "ml"):
        manifest = demo.Manifest(Path("f.yaml"), "kubeflow", 2, "baseline", namespace, {"metadata": {"name": "j"}},
                                 demo.KINDS[("kubeflow.org", "PyTorchJob")], {})
        demo._namespace(kubectl, manifest)
    created = [c[-1] for c in calls if c[:2] == ("create", "namespace")]
    assert created == ["ml"], calls
