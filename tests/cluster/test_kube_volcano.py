"""Volcano's kinds, end to end on the real control plane and on a plane of their own (the
other kinds run beside them, test_kube_jobs.py; what both share is tests/kube_jobs.py):
Volcano v1.10.0's controllers, admission and vc-scheduler installed for the module; the
manifest as `invoke manifests` writes it applied with kubectl into a namespace that
enforces the Pod Security level its header states; vc-scheduler binds the gang to the
kubelet stand-in's three nodes, which runs the pods as containers of the cluster tier's
image. A worker-only job and one with a master task train the all-reduce check, the DDP
example trains on three nodes, a job meets at the etcd its manifest brings, each reaching
phase Completed with the operator model held to its pods; a gang one node short starts no
pod at all; a job whose command always fails ends Failed after its stated retries.

Without the control plane's or Volcano's programs the tests fail under CI
(TORCHPOD_REQUIRE_TOOLS=1) and skip elsewhere, naming `invoke kube.build`; without the
image (``cluster_image``) they fail."""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Iterator
from typing import Any

import first_job
import pytest
import volcano_examples
from kube_records import assert_recordings_hold, record_jobs

from torchpod_toolkit.kube import kubelet as kubelet_mod
from torchpod_toolkit.manifests import jobs
from torchpod_toolkit.manifests.spec import ETCD_IMAGE

from cluster_helpers import EXAMPLES
from kube_helpers import until
from kube_jobs import (
    EXITING,
    NODES,
    WAIT,
    Cluster,
    assert_model_agrees,
    assert_one_group,
    bound,
    phase,
    podgroup_conditions,
    runs,
    start,
    submit,
    wait,
)

OPERATORS = ("volcano",)


@pytest.fixture(scope="module")
def cluster(kube, docker_client, cluster_image, session_id, tmp_path_factory) -> Iterator[Cluster]:
    """Three nodes and Volcano on the module's plane, stopped after the module."""
    yield from start(kube, docker_client, cluster_image, session_id, tmp_path_factory, OPERATORS)


def test_volcano_makes_the_pods_its_recordings_say(cluster):
    """What Volcano makes of both its kinds' renders, at three sizes, derives the operator model
    the committed recordings derive (tests/kube_records.py). The pods ask for no GPU: Volcano
    enqueues a gang only when the cluster holds what it asks for, and these nodes have none.
    The Volcano Jobs of other shapes the launcher's detector is held to are recorded beside
    them (tests/volcano_examples.py)."""
    owners = "jobs.batch.volcano.sh,podgroups.scheduling.volcano.sh"
    assert_recordings_hold(cluster, ("volcano", "volcano-master"), owners, gpus=(0, 0, 0), more={
        volcano_examples.KIND: lambda: record_jobs(cluster, volcano_examples.KIND, volcano_examples.EXAMPLES, owners,
                                                   volcano_examples.pods)})


@pytest.mark.crowd  # several jobs' torch processes at once (tests/crowd.py)
def test_the_kubernetes_first_job_page_holds_for_volcano(cluster, tmp_path):
    """docs/first-job/kubernetes.md run as written (first_job.LOCAL names the values
    replaced) for both Volcano kinds side by side: render, namespace, level and apply, the
    table's watch and pods, the phase wait of step 4, the TORCHPOD_RESULT lines through
    `kubectl logs` (the DDP example's replicas end with equal parameters), and the cancel.
    Volcano v1.10.0: vc-scheduler binds the gang, the env and
    svc plugins give each pod VC_TASK_INDEX and the job's hostfile and headless Service; the
    Job's phase is Completed once its tasks succeed (pkg/controllers/job/state/running.go).
    With a master and a worker task, the pytorch plugin gives each pod MASTER_ADDR (the
    master's pod on the job's headless Service), MASTER_PORT, WORLD_SIZE and RANK
    (pkg/controllers/job/plugins/distributed-framework/pytorch/pytorch.go)."""
    jobs_ = {k: first_job.submit_page(cluster, k, tmp_path) for k in ("volcano", "volcano-master")}
    for job in jobs_.values():
        first_job.watch_page(cluster, job)
    for kind, job in jobs_.items():
        first_job.wait_page(cluster, job, int(WAIT))
        results = [r for r in first_job.results_page(cluster, job) if r.get("workload") == "ddp_resnet"]
        assert sorted(r["rank"] for r in results) == [0, 1], (kind, results)
        assert all(r["ok"] and r["steps"] == 2 for r in results) and len({r["run_id"] for r in results}) == 1, results
        assert len({r["hostname"] for r in results}) == 2, results
        # DDP kept the replicas equal: every rank ends with the same parameters
        assert len({round(r["param_checksum"], 6) for r in results}) == 1, "the replicas' parameters differ"
        assert_model_agrees(cluster, job.namespace, job.path)
    for job in jobs_.values():
        first_job.cancel_page(cluster, job)
        until(f"{job.kind}: the cancelled job's pods gone", lambda ns=job.namespace: json.loads(cluster.kube.kubectl(
            "-n", ns, "get", "pods", "-o", "json").stdout)["items"] == [], seconds=EXITING)


def test_a_volcano_job_meets_at_the_etcd_its_manifest_brings(cluster, require_tool, tmp_path):
    """`--rdzv etcd --etcd-server`: the manifest's own etcd Pod and Service are applied with
    the Volcano job, whose ranks meet by etcd-v2 at the Service's name (the stand-in names
    the etcd pod by the Services that select it, podargs.service_names). quay.io/coreos/etcd,
    the image the render names, cannot be pulled here: the cluster image with Debian's
    etcd-server binary as `etcd` (3.4, whose --enable-v2 serves the v2 API as 3.5's does)
    stands in for it under that name, for this test only."""
    binary = require_tool("etcd", "etcd-server")
    context = tmp_path / "etcd-image"
    context.mkdir()
    shutil.copy2(binary, context / "etcd")
    (context / "Dockerfile").write_text(f"FROM {cluster.image}\nCOPY etcd /usr/local/bin/etcd\n")
    cluster.docker.images.build(path=str(context), tag=ETCD_IMAGE, rm=True)
    try:
        job = submit(cluster, "volcano", "ve", 2, rdzv="etcd", etcd_server=True)
        assert "Rendezvous: etcd-v2 at ve-etcd:2379" in job["path"].read_text()
        wait(cluster, "ve", "jobs.batch.volcano.sh", "ve", "Volcano Job phase Completed",
             phase(cluster, "ve", "jobs.batch.volcano.sh", "ve", "Completed"))
        assert_one_group(cluster, "ve", world=2, nodes=2)
        # the group met in this etcd: torch's etcd-v2 rendezvous keeps its state under /torch/elastic
        (server,) = cluster.docker.containers.list(filters={"label": [
            f"{kubelet_mod.LABEL}={cluster.kubelet.id}", "io.kubernetes.pod.namespace=ve",
            "io.kubernetes.pod.name=ve-etcd", "io.kubernetes.container.name=etcd"]})
        read = "import urllib.request as u; print(u.urlopen('http://127.0.0.1:2379/v2/keys/?recursive=true').read())"
        code, keys = server.exec_run(["/opt/venv/bin/python", "-c", read])
        assert code == 0 and '"key":"/torch/elastic' in keys.decode(), keys.decode()[-2000:]
    finally:
        cluster.docker.images.remove(ETCD_IMAGE, force=True)


# more than half a node's GPUs (NodeShape: 8): one pod per node, whatever the CPUs and memory
GPUS_ONE_POD_PER_NODE = 5


def test_a_volcano_gang_one_node_short_starts_no_pod_at_all(cluster):
    """Volcano v1.10.0's gang plugin holds a job until minAvailable pods can be placed together
    (pkg/scheduler/plugins/gang/gang.go: the PodGroup gets condition Unschedulable, "N/M tasks
    in gang unschedulable"). The same job shape at the cluster's node count is bound to every
    node (it fits); one node more is bound nowhere, and no container of it starts."""
    shape = {"gpus_per_node": GPUS_ONE_POD_PER_NODE, "cpus_per_node": 2, "memory_per_node": "48Gi"}
    submit(cluster, "volcano", "gfit", NODES, ("/bin/true",), **shape)
    placed = until("the job at the node count bound to every node", lambda: len(bound(cluster, "gfit")) == NODES
                   and sorted(bound(cluster, "gfit")), seconds=WAIT)
    assert sorted(placed) == sorted(cluster.kubelet.names), placed
    cluster.kube.kubectl("delete", "namespace", "gfit", "--wait=false")

    submit(cluster, "volcano", "gshort", NODES + 1, ("/bin/true",), **shape)

    def unschedulable() -> list[dict[str, Any]]:
        return [c for c in podgroup_conditions(cluster, "gshort")
                if c.get("type") == "Unschedulable" and c.get("status") == "True"]
    held = until("the PodGroup's condition Unschedulable", unschedulable, seconds=WAIT)
    # "N/M tasks in gang unschedulable: pod group is not ready, 4 minAvailable": M counts the
    # pods made so far, and the controller makes none while the PodGroup is Pending
    assert re.search(rf"\d+/\d+ tasks in gang unschedulable: pod group is not ready, {NODES + 1} minAvailable",
                     held[0].get("message", "")), held
    deadline = time.monotonic() + 20  # the scheduler runs every second: 20 of them bind nothing
    while time.monotonic() < deadline:
        assert bound(cluster, "gshort") == [], "a pod of a gang one node short was bound"
        time.sleep(1.0)
    assert runs(cluster, "gshort") == []
    cluster.kube.kubectl("delete", "namespace", "gshort", "--wait=false")


def test_volcano_jobs_whose_script_always_fails_end_failed_after_their_stated_restarts(cluster):
    """Three Jobs whose command always fails, side by side. Worker-only and master+worker:
    each failed pod (restartPolicy Never, so its phase is Failed) fires PodFailed, whose
    RestartJob restarts the whole gang; once RetryCount reaches maxRetry the Job's phase is
    Failed (Volcano v1.10.0, pkg/controllers/job/state/restarting.go). Elastic (--nodes 1:2):
    no policy, so each pod runs once and stays Failed, and with every pod ended and fewer than
    the minimum succeeded the Job is Failed (state/running.go). No pod is left running. Under
    restartPolicy OnFailure the pods would never fail and each Job would restart forever."""
    # its script names no file: every node's launcher exits 2 at every start, before the rendezvous
    failing = (f"{EXAMPLES}/no_such_script.py",)
    made = {"vcx": submit(cluster, "volcano", "vcx", 2, failing),
            "vcmx": submit(cluster, "volcano-master", "vcmx", 2, failing),
            "vcex": submit(cluster, "volcano", "vcex", 2, failing, min_nodes=1)}
    for name, job in made.items():
        said = job["path"].read_text()
        assert ("at most 3 times (PET_MAX_RESTARTS)" if name == "vcex" else
                f"at most {jobs.RESTARTS} times (maxRetry), then the Job is Failed") in said, said[:1500]
    for name in made:
        wait(cluster, name, "jobs.batch.volcano.sh", name, "Volcano Job phase Failed",
             phase(cluster, name, "jobs.batch.volcano.sh", name, "Failed"))

    def running(name: str) -> list[str]:
        pods = json.loads(cluster.kube.kubectl("-n", name, "get", "pods", "-o", "json").stdout)["items"]
        return [p["metadata"]["name"] for p in pods if p["status"].get("phase") in ("Pending", "Running")]
    for name in made:
        found = json.loads(cluster.kube.kubectl("-n", name, "get", "jobs.batch.volcano.sh", name, "-o",
                                                "json").stdout)
        until(f"{name}: no pod of the failed Job left running", lambda name=name: running(name) == [], seconds=60)
        ran = runs(cluster, name)
        assert ran and all(r.code not in (0, None) for r in ran), [(r.pod, r.code) for r in ran]
        if name == "vcex":  # each pod ran once
            assert found["status"].get("retryCount", 0) == 0 and len(ran) == 2, (found["status"], ran)
        else:
            assert found["status"]["retryCount"] == jobs.RESTARTS, found["status"]
            assert len(ran) <= 2 * (1 + jobs.RESTARTS), [(r.pod, r.container) for r in ran]
