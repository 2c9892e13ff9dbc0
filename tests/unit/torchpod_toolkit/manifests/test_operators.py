"""torchpod_toolkit.manifests.operators: every pod the operator model says a manifest creates
(its hostname, files and environment) plans as intended when handed to the launcher. Each
operator's own model is tested beside its module (models/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchpod.schedulers.common import Facts
from torchpod_toolkit.manifests import kube, operators
from torchpod_toolkit.manifests.models.common import Pod
from torchpod_toolkit.manifests.spec import NODE_RANGE_KINDS, JobSpec, check

from launcher_cases import plan_for
from manifest_cases import IMAGE, KUBE_SPECS, spec_id


def _pod_plan(pod: Pod, tmp_path: Path):
    env = dict(pod.env)
    root = tmp_path / pod.name
    for path, text in pod.files:
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    env["CUDA_VISIBLE_DEVICES"] = ""
    args = list(pod.args)
    assert args[0] == "run" and "--" in args, args  # the image's entrypoint, no shell
    split = args.index("--")
    return plan_for(env, tuple(args[1:split]), Facts(hostname=pod.hostname, root=root, sysfs_root=root / "sys"),
                    script=args[split + 1])


EXPECTED_SCHEDULER = {"volcano": "volcano", "volcano-master": "volcano", "kubeflow": "kubeflow",
                      "kubeflow-elastic": "kubeflow", "trainer": "kubeflow", "runai": "runai", "lws": "lws",
                      "jobset": "jobset"}


def _endpoint(spec: JobSpec) -> str:
    n = spec.name
    return {"volcano": f"{n}-worker-0.{n}", "volcano-master": f"{n}-master-0.{n}",
            "kubeflow": f"{n}-master-0", "runai": f"{n}-master-0", "kubeflow-elastic": f"{n}-worker-0",
            "trainer": f"{n}-node-0-0.{n}", "lws": f"{n}-0.{n}.{spec.namespace}",
            "jobset": f"{n}-node-0-0.{n}"}[spec.scheduler] + f":{check(spec).port}"


@pytest.mark.parametrize("spec", KUBE_SPECS, ids=spec_id)
def test_every_pod_the_operator_creates_plans_as_intended(spec, tmp_path):
    spec = check(spec)
    pods = operators.pods(kube.objects(spec))
    assert len(pods) == spec.nodes
    plans = [_pod_plan(p, tmp_path) for p in pods]
    assert {p.scheduler for p in plans} == {EXPECTED_SCHEDULER[spec.scheduler]}
    assert {str(p.nnodes).split(":")[-1] for p in plans} == {str(spec.nodes)}
    assert sorted(p.node_rank for p in plans) == list(range(spec.nodes))
    assert len({p.rdzv_id for p in plans}) == 1
    if spec.rdzv == "etcd":
        assert {(p.rdzv_backend, str(p.rdzv_endpoint)) for p in plans} == {("etcd-v2", spec.etcd_endpoint)}
    else:
        assert {str(p.rdzv_endpoint) for p in plans} == {_endpoint(spec)}
        hosts = [dict(p.rdzv_conf).get("is_host") for p in plans]
        assert hosts == ["true"] + ["false"] * (spec.nodes - 1), hosts
    if spec.preset:
        assert all(dict(p.env).get("NCCL_IB_HCA") or "TORCHPOD_PRESET" in dict(pod.env)
                   for p, pod in zip(plans, pods))


# --- --nodes MIN:MAX: the launcher plans MIN:MAX on every modelled pod --------------------
@pytest.mark.parametrize("kind", NODE_RANGE_KINDS)
@pytest.mark.parametrize("rdma", ["none", "hostnetwork"])
def test_an_elastic_jobs_pods_all_plan_min_max_with_restarts(kind, rdma, tmp_path):
    spec = check(JobSpec(kind, "2:3", IMAGE, ("train.py",), name="el", rdma=rdma, gpus_per_node=0))
    pods = operators.pods(kube.objects(spec))
    assert len(pods) == 3  # MAX pods; the scheduler may run MIN of them
    plans = [_pod_plan(p, tmp_path) for p in pods]
    assert {str(p.nnodes) for p in plans} == {"2:3"}
    assert {p.max_restarts for p in plans} == {3}
    assert sorted(p.node_rank for p in plans) == [0, 1, 2]
    assert {str(p.rdzv_endpoint) for p in plans} == {_endpoint(spec)}
    assert all({"--nnodes=2:3", "--max-restarts=3"} <= set(p.torchrun_args) for p in plans)
