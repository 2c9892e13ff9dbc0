"""The ``kube`` namespace of tasks.py: ``kube.build`` hands the checkout and the environment to
torchpod_toolkit.kube.build, prints its table, and turns its errors into one line and the
error's exit code. Nothing is compiled: the toolkit's steps are stand-ins."""

from __future__ import annotations

import pytest
from invoke import Context, Exit

from torchpod.errors import InputError
from torchpod_toolkit.kube import build

from paths import ROOT
from tasks_cli import load_tasks

TASKS = load_tasks("tasks_kube_under_test")


def test_kube_build_is_a_task_of_the_kube_namespace_with_no_flags():
    task = TASKS.ns["kube.build"]
    assert task.body is TASKS.kube_build.body
    assert task.get_arguments() == []


def test_kube_build_builds_every_module_of_the_checkout_and_prints_the_table(monkeypatch, capsys):
    seen = {}

    def plans_for(root, env):
        seen["root"] = root
        return ["plane's plan", "an operator's plan"]

    def build_all(plans, env):
        seen["plans"] = plans
        return build.modules_table([("plane", [build.Built("etcd", None)]),
                                    ("jobset", [build.Built("jobset", 61.0)])])

    monkeypatch.setattr(build, "plans_for", plans_for)
    monkeypatch.setattr(build, "build_all", build_all)
    TASKS.ns["kube.build"](Context())
    assert seen == {"root": ROOT, "plans": ["plane's plan", "an operator's plan"]}
    assert capsys.readouterr().out.splitlines()[1:] == [f"{'plane':<20}{'etcd':<26}{'present':>10}",
                                                        f"{'jobset':<20}{'jobset':<26}{'61':>10}"]


def test_kube_build_reports_a_bad_module_in_one_line(monkeypatch):
    def plans_for(root, env):
        raise InputError("kube/go.mod: require k8s.io/kubernetes (none);\nexpected a release vX.Y.Z")

    monkeypatch.setattr(build, "plans_for", plans_for)
    monkeypatch.setattr(build, "build_all", lambda plans, env: pytest.fail("nothing is built after a bad module"))
    with pytest.raises(Exit) as caught:
        TASKS.ns["kube.build"](Context())
    assert caught.value.code == 2
    assert caught.value.message == "torchpod: kube/go.mod: require k8s.io/kubernetes (none); expected a release vX.Y.Z"


def test_kube_up_starts_from_the_build_cache_and_prints_the_report(monkeypatch, capsys, tmp_path):
    from torchpod_toolkit.kube import plane, planeup

    seen = {}
    record = plane.Plane(root=tmp_path, ports=plane.Ports(1, 2, 3, 4, 5), pids={}, binaries={}, seconds=4.2)
    monkeypatch.setattr(build, "plan_for", lambda root, env: build.Plan(ROOT / "kube", "go", "v1.37.2", (),
                                                                         tmp_path / "bin"))
    monkeypatch.setattr(build, "cache_root", lambda env: tmp_path / "cache")

    def up(bindir, cache, timeout):
        seen.update(bindir=bindir, cache=cache, timeout=timeout)
        return record

    monkeypatch.setattr(planeup, "up", up)
    TASKS.ns["kube.up"](Context(), timeout="30")
    assert seen == {"bindir": tmp_path / "bin", "cache": tmp_path / "cache", "timeout": 30.0}
    assert "started in   4.2 s" in capsys.readouterr().out


def test_kube_down_says_what_it_stopped_or_that_nothing_ran(monkeypatch, capsys, tmp_path):
    from torchpod_toolkit.kube import planeup

    monkeypatch.setattr(build, "cache_root", lambda env: tmp_path)
    monkeypatch.setattr(planeup, "down", lambda cache: None)
    TASKS.ns["kube.down"](Context())
    assert capsys.readouterr().out == "no control plane was started\n"
