"""torchpod.schedulers.volcano: Volcano (VC_TASK_INDEX, VK_TASK_INDEX, VC_<TASK>_HOSTS). Its own
``claims()`` and ``detect()`` called directly, on the shared fixtures
(tests/unit/fixtures/schedulers.yaml) that resolve to it and on the broken ones that reach it;
tests/unit/torchpod/test_schedulers.py runs the same fixtures through the whole of ``resolve()``.
The checks every detector runs (launcher_cases.DetectorCases) take this file's table of cases."""

from __future__ import annotations

import pytest
import volcano_examples

from torchpod.schedulers import volcano

from launcher_cases import DetectorCases, user_options


class TestVolcano(DetectorCases):
    detector = volcano
    claims = [
        {'VC_TASK_INDEX': '0'},
        {'VK_TASK_INDEX': '1'},
        {'VC_WORKER_HOSTS': 'w-0.j,w-1.j'},
        {'VC_MASTER_HOSTS': 'm-0.j'},
    ]
    not_claims = [
        {},
        {'VC_WORKER_NUM': '2'},
        {'MASTER_ADDR': 'm', 'WORLD_SIZE': '2', 'RANK': '0'},
    ]


# Volcano's pytorch plugin alone (pytorch.go; the webhook adds svc, nothing adds env): the
# master pod is node 0 whatever the pod's host name, and RANK is refused outside WORLD_SIZE.
_PYTORCH_ALONE = {
    "VC_MASTER_HOSTS": "pj-master-0.pj", "VC_WORKER_HOSTS": "pj-worker-0.pj,pj-worker-1.pj",
    "MASTER_ADDR": "pj-master-0.pj", "MASTER_PORT": "23456", "WORLD_SIZE": "3",
}


@pytest.mark.parametrize("hostname, rank", [("pj-master-0", "0"), ("pj-worker-0", "1"), ("oke-gpu-node-7", "2")])
def test_pytorch_plugin_alone_takes_the_node_from_rank(hostname, rank):
    from torchpod.schedulers.common import Facts

    env = {**_PYTORCH_ALONE, "RANK": rank}
    det = volcano.detect(env, Facts(hostname=hostname), user_options(env))
    assert (det.node_rank, str(det.nnodes), str(det.rdzv_endpoint)) == (int(rank), "3", "pj-master-0.pj:23456")
    assert det.local_addr == ["pj-master-0.pj", "pj-worker-0.pj", "pj-worker-1.pj"][int(rank)]


@pytest.mark.parametrize("rank, needle", [("3", "RANK='3' is outside WORLD_SIZE=3"), ("x", "RANK='x'")])
def test_pytorch_plugin_alone_refuses_a_bad_rank_in_one_line(rank, needle):
    from torchpod.errors import InputError
    from torchpod.schedulers.common import Facts

    env = {**_PYTORCH_ALONE, "RANK": rank}
    with pytest.raises(InputError, match=needle):
        volcano.detect(env, Facts(hostname="pj-worker-0"), user_options(env))


def test_without_env_plugin_or_pytorch_rank_the_index_is_still_asked_for():
    from torchpod.errors import InputError
    from torchpod.schedulers.common import Facts

    env = {"VC_WORKER_HOSTS": "j-worker-0.j,j-worker-1.j"}
    with pytest.raises(InputError, match="VC_TASK_INDEX is not set"):
        volcano.detect(env, Facts(hostname="j-worker-0"), user_options(env))


def test_pytorch_plugin_alone_refuses_a_rank_that_is_not_this_pods():
    from torchpod.errors import InputError
    from torchpod.schedulers.common import Facts

    env = {**_PYTORCH_ALONE, "RANK": "2"}
    with pytest.raises(InputError, match="RANK=2 but this pod is 'pj-worker-0.pj', node 1"):
        volcano.detect(env, Facts(hostname="pj-worker-0"), user_options(env))


def _each_pod(tmp_path, job, keep=lambda key: True):
    """(pod name, detect's answer: a Detection or the InputError's line) for every pod of the
    job, as the real Volcano made them (the operator model derived from its recordings,
    tests/volcano_examples.py)."""
    from torchpod.errors import InputError
    from torchpod.schedulers.common import Facts
    from torchpod_toolkit.manifests import operators

    answers = []
    for pod in operators.pods([job]):
        root = tmp_path / pod.name
        for path, text in pod.files:
            (root / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            (root / path.lstrip("/")).write_text(text)
        env = {k: v for k, v in pod.env if keep(k)}
        try:
            answers.append((pod.name, volcano.detect(env, Facts(hostname=pod.hostname, root=root), user_options(env))))
        except InputError as exc:
            answers.append((pod.name, str(exc).replace(str(root), "ROOT")))
    return answers


# Volcano's own two-task example (volcano-sh/volcano example/integrations/tensorflow/dist-mnist/
# tf-dist-mnist-example.yaml: ps x1, worker x2, plugins env and svc) with torchpod as the
# entrypoint: every pod gives the same one-line refusal, from the variables or from the svc
# plugin's /etc/volcano/*.host files alone.
@pytest.mark.parametrize("keep, source", [
    (lambda key: True, "VC_<TASK>_HOSTS"),
    (lambda key: not key.startswith("VC_") or key == "VC_TASK_INDEX", "ROOT/etc/volcano/*.host"),
], ids=["variables", "host-files"])
def test_volcanos_ps_and_worker_example_is_refused_alike_by_every_pod(tmp_path, keep, source):
    answers = _each_pod(tmp_path, volcano_examples.PS_AND_WORKER, keep)
    assert [name for name, _ in answers] == [f"tensorflow-dist-mnist-{p}" for p in ("ps-0", "worker-0", "worker-1")]
    lines = {answer for _, answer in answers}
    assert len(lines) == 1, answers  # one answer, the ps pod's included
    line = lines.pop()
    assert isinstance(line, str) and line.isprintable(), line
    assert line.startswith(f"{source} names the tasks PS (1 pod), WORKER (2 pods); expected one task, "
                           "or the two tasks master and worker"), line
    assert "`plugins: {pytorch: [], svc: []}`" in line


@pytest.mark.parametrize("job", volcano_examples.SEVERAL_TASKS,
                         ids=lambda job: "-".join(t["name"] for t in job["spec"]["tasks"]))
def test_other_sets_of_several_tasks_are_refused_alike_by_every_pod(tmp_path, job):
    answers = _each_pod(tmp_path, job)
    lines = {answer for _, answer in answers}
    assert len(lines) == 1 and all(isinstance(a, str) and "names the tasks" in a for a in lines), answers


@pytest.mark.parametrize("job", volcano_examples.MASTER_AND_WORKER,
                         ids=lambda job: "-".join(sorted(job["spec"]["plugins"])))
def test_master_and_worker_are_one_plan_that_every_pod_agrees_on(tmp_path, job):
    answers = _each_pod(tmp_path, job)
    expected_hosts = ("pt-master-0.pt", "pt-worker-0.pt", "pt-worker-1.pt")
    for node, (name, det) in enumerate(sorted(answers, key=lambda a: a[0])):
        assert not isinstance(det, str), (name, det)
        assert (det.hosts, str(det.nnodes), det.node_rank, det.local_addr) == (expected_hosts, "3", node,
                                                                               expected_hosts[node])
    plans = {(det.hosts, str(det.rdzv_endpoint), det.rdzv_id) for _, det in answers}
    assert len(plans) == 1, plans  # one endpoint and one job id, master pod 0 first


def test_a_name_in_two_task_lists_is_refused_in_one_line():
    from torchpod.errors import InputError
    from torchpod.schedulers.common import Facts

    # both tasks' templates set `hostname: trainer`, so the svc plugin lists it in each
    env = {"VC_TASK_INDEX": "0", "VC_MASTER_HOSTS": "trainer.j", "VC_WORKER_HOSTS": "trainer.j,j-worker-1.j"}
    with pytest.raises(InputError) as caught:
        volcano.detect(env, Facts(hostname="trainer"), user_options(env))
    line = str(caught.value)
    assert line.isprintable() and line.startswith("'trainer' is listed in VC_MASTER_HOSTS and VC_WORKER_HOSTS; "), line
    assert "POD_NAME" in line
    # the pod's own name, given by the downward API, places it
    env["POD_NAME"] = "j-worker-1"
    env["VC_TASK_INDEX"] = "1"
    det = volcano.detect(env, Facts(hostname="trainer"), user_options(env))
    assert (det.node_rank, det.local_addr) == (2, "j-worker-1.j")


@pytest.mark.parametrize("env, needle", [
    ({"VC_TASK_INDEX": "0", "VC_MASTER_HOSTS": "j-master-0.j", "VC_WORKER_HOSTS": "j-worker-0.j,j-worker-1.j"},
     "cannot tell which Volcano task this pod belongs to: hostname 'oke-gpu-node-3' is not in "
     "VC_MASTER_HOSTS, VC_WORKER_HOSTS"),
    ({"VC_TASK_INDEX": "0", "VC_PS_HOSTS": "j-ps-0.j", "VC_WORKER_HOSTS": "j-worker-0.j,j-worker-1.j"},
     "VC_<TASK>_HOSTS names the tasks PS (1 pod), WORKER (2 pods)"),
])
def test_a_pod_in_no_list_of_several_tasks_is_refused_in_one_line(env, needle):
    from torchpod.errors import InputError
    from torchpod.schedulers.common import Facts

    with pytest.raises(InputError) as caught:  # a hostNetwork pod: the node's name, no POD_NAME, no RANK
        volcano.detect(env, Facts(hostname="oke-gpu-node-3"), user_options(env))
    assert str(caught.value).isprintable() and str(caught.value).startswith(needle), str(caught.value)
