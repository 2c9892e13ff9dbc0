"""Volcano Jobs of shapes torchpod does not render, whose pods the launcher's Volcano
detector is held to (tests/unit/torchpod/schedulers/test_volcano.py): Volcano's own
two-task example (volcano-sh/volcano example/integrations/tensorflow/dist-mnist/
tf-dist-mnist-example.yaml: ps x1, worker x2, plugins env and svc) with torchpod as the
entrypoint, other sets of several tasks, and a master and a worker under each set of
plugins. Their pods are what the real Volcano made of them, recorded
(toolkit/torchpod_toolkit/manifests/recorded/volcano-examples.json, made and checked afresh
by tests/cluster/test_kube_volcano.py)."""

from __future__ import annotations

from typing import Any

KIND = "volcano-examples"  # the recording's name


def volcano_job(name: str, namespace: str, tasks: tuple[tuple[str, int], ...],
                plugins: dict[str, list[str]]) -> dict[str, Any]:
    """A Volcano Job whose every task runs torchpod: tasks is ((task, replicas), ...). Its
    pods ask for a node label no node carries: recorded, they are never bound (the model
    ignores a nodeSelector). Each job has a namespace of its own: a role recorded in one job
    alone is modelled only as that job said it (derive.py refuses what its one recording
    cannot tell, such as its namespace from another)."""
    template = {"spec": {"containers": [{"name": "train", "image": "torchpod/cuda:2.6",
                                         "args": ["torchpod", "run", "train.py"]}],
                         "nodeSelector": {"torchpod.example.com/recording": "never"}}}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minAvailable": sum(n for _, n in tasks), "schedulerName": "volcano", "plugins": plugins,
                     "tasks": [{"name": t, "replicas": n, "template": template} for t, n in tasks]}}


PS_AND_WORKER = volcano_job("tensorflow-dist-mnist", "example-mnist", (("ps", 1), ("worker", 2)),
                            {"env": [], "svc": []})
SEVERAL_TASKS = tuple(volcano_job("j", f"example-tasks-{n}", tasks, {"env": [], "svc": []}) for n, tasks in enumerate((
    (("ps", 1), ("worker", 2), ("master", 1)), (("chief", 1), ("trainer", 2)), (("master", 1), ("evaluator", 1)))))
MASTER_AND_WORKER = tuple(volcano_job("pt", f"example-plugins-{n}", (("worker", 2), ("master", 1)), plugins)
                          for n, plugins in enumerate(({"env": [], "svc": []}, {"pytorch": [], "svc": []},
                                                       {"pytorch": [], "env": [], "svc": []})))
EXAMPLES = (PS_AND_WORKER, *SEVERAL_TASKS, *MASTER_AND_WORKER)


def pods(job: dict[str, Any]) -> int:
    return sum(t["replicas"] for t in job["spec"]["tasks"])
