"""torchpod_toolkit.manifests.operators: every pod the operator model says a manifest creates
(its hostname, files and environment) plans as intended when handed to the launcher."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchpod.errors import InputError
from torchpod.schedulers.common import Facts
from torchpod_toolkit.manifests import kube, operators
from torchpod_toolkit.manifests.spec import JobSpec, check

from launcher_cases import plan_for
from manifest_cases import KUBE_SPECS, spec_id


def _pod_plan(pod: operators.Pod, tmp_path: Path):
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
