"""Kubeflow's, Trainer's, JobSet's and LeaderWorkerSet's kinds, end to end on the real
control plane: the manifest as `invoke manifests` writes it is applied with kubectl into a
namespace that enforces the Pod Security level its header states; the real operator
(installed once for the module, torchpod_toolkit.kube.operators) makes the pods; the real
scheduler binds them to the kubelet stand-in's six nodes (torchpod_toolkit.kube.kubelet),
which runs them as containers of the cluster tier's image; the launcher in each reads what
the operator gave its pod and runs torchrun. Each job is waited for, bounded, until it
reaches its own success condition, and its pods' logs show one group of the expected world
size (a preflight job proves a JobSet's fabric); then the operator model (what `invoke demo
--manifest` runs without a plane) is held to the pods the real operator made. The Run:ai
render is admitted and left to Run:ai's scheduler; a fault closes the module: an elastic
job's deleted pod, recreated and resumed from the snapshot. Volcano's kinds run on a plane
of their own beside this one (test_kube_volcano.py); what both share is tests/kube_jobs.py.

Without the control plane's or an operator's programs the tests fail under CI
(TORCHPOD_REQUIRE_TOOLS=1) and skip elsewhere, naming `invoke kube.build`; without the
image (``cluster_image``) they fail."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import first_job
import pytest
import yaml
from kube_records import assert_recordings_hold

from torchpod_toolkit.cluster.runner import parse_results
from torchpod_toolkit.kube import kubelet as kubelet_mod
from torchpod_toolkit.manifests import jobs
from torchpod_toolkit.manifests import operators as model_operators
from torchpod_toolkit.manifests.models.runai import RUNAI_SCHEDULER

from cluster_helpers import EXAMPLES
from kube_helpers import settled, until
from kube_jobs import (
    EXITING,
    NODES,
    WAIT,
    Cluster,
    assert_model_agrees,
    assert_one_group,
    assert_ranks_follow_the_named_nodes,
    bound,
    condition,
    first_success,
    runs,
    start,
    submit,
    wait,
)

OPERATORS = ("training-operator", "jobset", "lws", "trainer")
# the objects of these operators whose UIDs a recorded pod may carry
RECORDED_OWNERS = ("pytorchjobs.kubeflow.org,jobsets.jobset.x-k8s.io,leaderworkersets.leaderworkerset.x-k8s.io,"
                   "trainjobs.trainer.kubeflow.org,jobs.batch,statefulsets.apps")
NODE_COUNT = 6


@pytest.fixture(scope="module")
def cluster(kube, docker_client, cluster_image, session_id, tmp_path_factory) -> Iterator[Cluster]:
    """Six nodes and Kubeflow's training-operator, Trainer, JobSet and LeaderWorkerSet on the
    module's plane, stopped after the module."""
    yield from start(kube, docker_client, cluster_image, session_id, tmp_path_factory, OPERATORS, {},
                     nodes=NODE_COUNT)


# training-operator v1.8.1 gives each Worker pod of a job with a Master its init container
# init-pytorch (pkg/controller.v1/pytorch/initcontainer.go), which waits until the Master's
# name resolves; its default image, alpine:3.10, comes from Docker Hub, which this machine
# cannot reach, so the operator is installed as such a site installs it: its own image
# (torchpod's) and template (operatorspecs.INIT_CONTAINERS: `getent hosts` for nslookup). The
# render's Pod Security level counts that container ('baseline', so the namespace admits it).
#
# The kinds of the Kubernetes first-job page whose operators this module runs (Volcano's are
# test_kube_volcano's), each trained side by side on the one plane.
PAGE_KINDS = ("kubeflow", "kubeflow-elastic", "trainer", "jobset", "lws", "runai")
SUBMITTED = "trainer"  # the kind submitted in one step (--submit), as the page offers
OWN_IMAGE_KIND = "jobset"  # the kind whose job runs an image of the user's own

# An image of the user's own: torchpod installed in it, and an ENTRYPOINT of its own, as NVIDIA's
# NGC images have (/opt/nvidia/nvidia_entrypoint.sh: a banner, then `exec "$@"`)
OWN_IMAGE = "own.example.com/ml/pytorch-site:1"
OWN_BANNER = "own image: site banner"
OWN_DOCKERFILE = f"""FROM {{base}}
ENTRYPOINT ["/bin/sh", "-c", "echo '{OWN_BANNER}' >&2; exec \\"$@\\"", "sh"]
"""


@pytest.mark.crowd  # several jobs' torch processes at once (tests/crowd.py)
def test_the_kubernetes_first_job_page_holds_for_each_kind_it_names(cluster, tmp_path):
    """docs/first-job/kubernetes.md run as written (first_job.LOCAL names the values replaced):
    render, namespace, its Pod Security level and apply (the TrainJob in one step, --submit,
    as the page offers), the table's watch and pods, its done-when wait, the TORCHPOD_RESULT
    lines through `kubectl logs` (the stand-in's log endpoint), and the cancel. Each job is
    also what the operator model says, and its ranks are one group on the nodes torchpod
    named. What each operator does: training-operator v1.8.1 gives Master and Worker
    MASTER_ADDR/PORT, WORLD_SIZE, RANK and PET_* (pkg/controller.v1/pytorch/envvar.go) and is
    Succeeded with its Master, an elastic job with any Worker (pytorchjob_controller.go,
    UpdateJobStatus); Trainer v2.3.0's TrainJob is Complete with its JobSet
    (pkg/runtime/framework/plugins/jobset); LWS v0.9.0 has no success condition: it serves,
    restarting every pod that ends, so its pods' first runs are read. Run:ai's job is
    applied and watched; its pods wait for Run:ai's scheduler, which no module runs. The
    JobSet's image is one of the user's own whose ENTRYPOINT is a banner script (NGC's kind):
    the pods name `torchpod` as their command, so the banner never runs; a render that left
    torchpod to the ENTRYPOINT would hand `run -- ...` to it, which would exec `run` and fail."""
    # the JobSet runs an image of the user's own, whose ENTRYPOINT is not torchpod (docs/own-image.md)
    (tmp_path / "Dockerfile").write_text(OWN_DOCKERFILE.format(base=cluster.image))
    cluster.docker.images.build(path=str(tmp_path), tag=OWN_IMAGE, rm=True)
    try:
        page_kinds(cluster, tmp_path)
    finally:
        cluster.docker.images.remove(OWN_IMAGE, force=True)


def page_kinds(cluster: Cluster, tmp_path) -> None:
    jobs_ = {k: first_job.submit_page(cluster, k, tmp_path, by_submit=k == SUBMITTED,
                                      image=OWN_IMAGE if k == OWN_IMAGE_KIND else "") for k in PAGE_KINDS}
    for job in jobs_.values():
        first_job.watch_page(cluster, job)
    cancelled: set[str] = set()
    # a serving kind first: read and cancelled, its group stops retraining beside the others
    for kind, job in sorted(jobs_.items(), key=lambda kj: first_job.done_command(kj[1].row, "", 1) is not None):
        if f"schedulerName: {RUNAI_SCHEDULER}" in job.path.read_text():
            continue  # its pods wait for a scheduler no module here runs
        serves = first_job.done_command(job.row, job.namespace, int(WAIT)) is None  # the table: it never ends
        if serves:
            wait(cluster, job.namespace, job.row.watch[job.row.watch.index("get") + 1], "train", "every pod's run "
                 "exit 0", lambda ns=job.namespace: len(first_success(runs(cluster, ns))) == 2)
        else:
            first_job.wait_page(cluster, job, int(WAIT))
        # a serving group (LWS) is recreated after each run: any moment's logs hold at least one rank's line
        want = 1 if serves else 2
        results = settled(lambda job=job, serves=serves: [r for r in first_job.results_page(cluster, job, churn=serves)
                                           if r.get("workload") == "ddp_resnet"],
                          lambda found, want=want: len(found) >= want, EXITING)
        assert len(results) >= want and all(r["ok"] and r["steps"] == 2 for r in results), (kind, results)
        # a job's success can come before its last pod's run has ended (an elastic one's with any Worker's)
        done = list(settled(lambda job=job: first_success(runs(cluster, job.namespace)), lambda ok: len(ok) >= 2,
                            EXITING).values())
        text = "\n".join(f"--- {r.pod}\n{r.log[-3000:]}" for r in runs(cluster, job.namespace))
        ddp = [res for r in done for res in parse_results(r.log) if res.get("workload") == "ddp_resnet"]
        assert sorted(r["rank"] for r in ddp) == [0, 1] and len({r["run_id"] for r in ddp}) == 1, (kind, text[-6000:])
        assert len({r["hostname"] for r in ddp}) == 2, ddp
        assert_ranks_follow_the_named_nodes(done, text, "ddp_resnet")
        assert_model_agrees(cluster, job.namespace, job.path)
        if kind == OWN_IMAGE_KIND:  # the pods named their command: the image's own ENTRYPOINT never ran
            assert "- torchpod\n" in job.path.read_text() and all(OWN_BANNER not in r.log for r in done), text[-3000:]
        if serves:  # cancelled once read (step 5): a serving group retrains until then, loading every core
            first_job.cancel_page(cluster, job)
            cancelled.add(kind)
    # the Worker waited for the Master's name in the operator's own init container
    inits = cluster.docker.containers.list(all=True, filters={"label": [
        f"{kubelet_mod.LABEL}={cluster.kubelet.id}", "io.kubernetes.pod.namespace=ml-kubeflow",
        "io.kubernetes.container.name=init-pytorch"]})
    assert [c.labels["io.kubernetes.pod.name"] for c in inits] == ["train-worker-0"]
    assert inits[0].attrs["State"]["ExitCode"] == 0 and "train-master-0" in inits[0].logs().decode()
    for job in jobs_.values():
        if job.kind not in cancelled:
            first_job.cancel_page(cluster, job)
    for job in jobs_.values():
        until(f"{job.kind}: the cancelled job's pods gone", lambda ns=job.namespace: json.loads(cluster.kube.kubectl(
            "-n", ns, "get", "pods", "-o", "json").stdout)["items"] == [], seconds=EXITING)


def test_the_operators_make_the_pods_their_recordings_say(cluster):
    """What training-operator, JobSet, LeaderWorkerSet and Trainer make of each of their
    kinds' renders, at three sizes, derives the operator model the committed recordings derive
    (tests/kube_records.py): the model `invoke demo --manifest` and the harness use is what
    these operators did, recorded, and checked against them afresh here."""
    assert_recordings_hold(cluster, ("kubeflow", "kubeflow-elastic", "kubeflow-elastic-etcd", "trainer", "lws",
                                     "jobset"), RECORDED_OWNERS)


def test_a_jobset_of_three_nodes_trains_to_completed(cluster):
    """JobSet v0.12.0: one Indexed Job per node behind the JobSet's headless Service, the pods
    named by hostname.subdomain; the JobSet is Completed when every replicated Job completes
    (its default success policy, pkg/controllers/jobset_controller.go)."""
    job = submit(cluster, "jobset", "js", NODES)
    wait(cluster, "js", "jobsets.jobset.x-k8s.io", "js", "JobSet condition Completed",
         condition(cluster, "js", "jobsets.jobset.x-k8s.io", "js", "Completed"))
    assert_one_group(cluster, "js", world=NODES, nodes=NODES)
    # c10d names each store connection's peer by a reverse lookup of its address; the cluster
    # DNS answers it (podargs.sandbox_name), where an unanswered one stalls the job 10 s a time
    unanswered = [r.pod for r in runs(cluster, "js") if "hostname of the client socket cannot be retrieved" in r.log]
    assert unanswered == [], unanswered
    assert_model_agrees(cluster, "js", job["path"])


def test_a_preflight_job_proves_the_fabric_of_a_jobset_and_names_no_slow_node(cluster):
    """`--workload preflight` (torchpod.preflight, run as the pods' module) on a JobSet of
    three: rank 0 reports every node and pair, names no node slow or failing (nothing is
    throttled), and the JobSet completes because every rank exited 0."""
    job = submit(cluster, "jobset", "pf", NODES, ("--pair-bytes", "4M", "--max-bytes", "1M", "--iters", "3",
                                                 "--warmup", "1", "--allow-undecided"), workload="preflight")
    wait(cluster, "pf", "jobsets.jobset.x-k8s.io", "pf", "JobSet condition Completed",
         condition(cluster, "pf", "jobsets.jobset.x-k8s.io", "pf", "Completed"))
    done = first_success(runs(cluster, "pf"))
    (report, *more) = [res for r in done.values() for res in parse_results(r.log) if res.get("workload") == "preflight"]
    assert not more and len(done) == NODES, done
    assert report["world_size"] == NODES and len(report["nodes"]) == NODES, report
    assert report["slow_nodes"] == [] and report["failing"] == [], report
    assert report["pairs"] and all(p["busbw_gbps"] > 0 for p in report["pairs"]), report["pairs"]
    assert_model_agrees(cluster, "pf", job["path"])


def test_a_runai_pytorchjob_is_admitted_and_its_pods_wait_for_runais_scheduler(cluster):
    """The Run:ai render is a PyTorchJob for Run:ai's scheduler, which no module here builds:
    the API server and training-operator's webhook admit it as written, the operator makes
    the pods the operator model names, each naming runai-scheduler, and the default
    scheduler leaves them to it (none is bound)."""
    job = submit(cluster, "runai", "ra", 2)
    docs = [d for d in yaml.safe_load_all(job["path"].read_text()) if d]

    def made() -> list[dict[str, Any]]:
        found = cluster.kube.kubectl("-n", "ra", "get", "pods", "-o", "json", check=False)
        pods = json.loads(found.stdout).get("items", []) if found.returncode == 0 else []
        return pods if len(pods) == 2 else []
    pods = until("the operator makes the Run:ai job's pods", made, seconds=WAIT)
    assert sorted(p["metadata"]["name"] for p in pods) == sorted(p.name for p in model_operators.pods(docs))
    assert {p["spec"].get("schedulerName") for p in pods} == {"runai-scheduler"}
    time.sleep(5)  # the default scheduler runs every second: five of them bind nothing
    assert bound(cluster, "ra") == []


# --- faults ---------------------------------------------------------------------------------------

# a job that fails on every node at every start, at once: its script names no file, so the
# launcher exits 2 before the rendezvous (a script that fails after it would make each
# attempt wait for nodes whose restarts have drifted apart, up to the rendezvous timeout)
FAILING = (f"{EXAMPLES}/no_such_script.py",)


def left_running(cluster: Cluster, namespace: str) -> list[str]:
    found = json.loads(cluster.kube.kubectl("-n", namespace, "get", "pods", "-o", "json").stdout)["items"]
    return [p["metadata"]["name"] for p in found if (p.get("status") or {}).get("phase") in ("Pending", "Running")]


def test_jobs_whose_script_always_fails_end_failed_within_their_stated_restarts(cluster):
    """A PyTorchJob, an elastic one, a TrainJob and a JobSet whose command always fails, side
    by side: each reaches its own Failed condition after the restarts its header states, and
    no pod is left running. The PyTorchJobs' containers restart in place (OnFailure) until
    their restarts summed over the running pods reach runPolicy.backoffLimit (training-operator
    v1.8.1 pkg/core/job.go, PastBackoffLimit; its CleanPodPolicy Running then deletes the
    pods); the TrainJob's Job fails once its pods' restarts reach Kubernetes' default
    backoffLimit, 6 (pkg/controller/job, pastBackoffLimitOnFailure), its JobSet fails and the
    TrainJob with it; the JobSet recreates its Job after each failure, failurePolicy.maxRestarts times."""
    kinds = {"ptx": ("kubeflow", "pytorchjobs.kubeflow.org"), "ptex": ("kubeflow-elastic", "pytorchjobs.kubeflow.org"),
             "tjx": ("trainer", "trainjobs.trainer.kubeflow.org"), "jsx": ("jobset", "jobsets.jobset.x-k8s.io")}
    for name, (scheduler, _) in kinds.items():
        header = submit(cluster, scheduler, name, 2, FAILING)["path"].read_text()
        stated = " 6 failures " if scheduler == "trainer" else f" {jobs.RESTARTS} times"
        assert "# Restarts: " in header and stated in header, header[:1500]
    for name, (_, kind) in kinds.items():
        wait(cluster, name, kind, name, f"{kind} condition Failed", condition(cluster, name, kind, name, "Failed"))
        until(f"{name}: no pod left running", lambda name=name: left_running(cluster, name) == [], seconds=EXITING)
        assert all(r.code not in (0, None) for r in runs(cluster, name)), [(r.pod, r.code) for r in runs(cluster, name)]
    # the JobSet restarted exactly as stated: 1 + RESTARTS rounds of both pods
    jobset = json.loads(cluster.kube.kubectl("-n", "jsx", "get", "jobsets.jobset.x-k8s.io", "jsx", "-o",
                                             "json").stdout)
    assert jobset["status"]["restarts"] == jobs.RESTARTS, jobset["status"]
    assert len(runs(cluster, "jsx")) == 2 * (1 + jobs.RESTARTS), [(r.pod, r.container) for r in runs(cluster, "jsx")]
    # the pods restarted in place until the restarts made, summed, reached the limit: the
    # limit, or one more where both pods restarted at once
    for name, limit in (("ptx", jobs.RESTARTS), ("ptex", jobs.RESTARTS), ("tjx", 6)):
        restarts = len(runs(cluster, name)) - 2
        assert limit <= restarts <= limit + 1, (name, [(r.pod, r.container) for r in runs(cluster, name)])

EPOCHS = 10
RESUMED = "Resuming training from snapshot at Epoch"


def test_an_elastic_pytorchjob_whose_pod_is_deleted_gets_it_back_and_resumes_from_its_snapshot(
        cluster, tmp_path_factory):
    """training-operator v1.8.1 recreates a deleted Worker pod (pkg/controller.v1/common/pod.go:
    a replica index without a pod gets one); the torchrun agent on the other pod sees its
    group fail, re-forms the rendezvous with the new pod (elasticPolicy maxRestarts), every
    rank loads the snapshot from the shared hostPath volume, and the job still ends Succeeded."""
    shared = tmp_path_factory.mktemp("snapshot")
    shared.chmod(0o777)  # the pods run as uid 1000
    command = (f"{EXAMPLES}/snapshot_trainer.py", str(EPOCHS), "1", "--snapshot-path", "/shared/snapshot.pt",
               "--epoch-seconds", "1", "--dataset-size", "256")
    submitted = submit(cluster, "kubeflow-elastic", "ptf", 2, command, volume=(f"hostpath:{shared}:/shared",))
    assert submitted["level"] == "privileged"  # a hostPath volume fails baseline; the header says so

    def epochs_run() -> int:
        found = [int(n) for r in runs(cluster, "ptf") for n in re.findall(r"EPOCHS_RUN=(\d+)\)", r.log)]
        return max(found, default=0)
    until("three epochs run before the fault", lambda: epochs_run() >= 3, seconds=WAIT)
    saved = epochs_run()
    assert saved < EPOCHS, "training finished before the fault; slow the epochs down"
    old = json.loads(cluster.kube.kubectl("-n", "ptf", "get", "pod", "ptf-worker-1", "-o", "json").stdout)
    cluster.kube.kubectl("-n", "ptf", "delete", "pod", "ptf-worker-1", "--wait=false")

    def recreated() -> bool:
        found = cluster.kube.kubectl("-n", "ptf", "get", "pod", "ptf-worker-1", "-o", "json", check=False)
        return found.returncode == 0 and json.loads(found.stdout)["metadata"]["uid"] != old["metadata"]["uid"]
    until("the operator recreates the deleted pod", recreated, seconds=WAIT)
    wait(cluster, "ptf", "pytorchjobs.kubeflow.org", "ptf", "PyTorchJob condition Succeeded after the fault",
         condition(cluster, "ptf", "pytorchjobs.kubeflow.org", "ptf", "Succeeded"))
    # the job succeeds with worker 0 (its success policy); the other may still be exiting
    done = until("both pods' runs exit 0", lambda: len(first_success(runs(cluster, "ptf"))) == 2
                 and first_success(runs(cluster, "ptf")), seconds=60)
    results = [res for r in done.values() for res in parse_results(r.log) if res.get("workload") == "snapshot_trainer"]
    logs = "\n".join(f"--- {r.pod} ({r.container}, exit {r.code})\n{r.log[-3000:]}" for r in runs(cluster, "ptf"))
    assert sorted(r["rank"] for r in results) == [0, 1], logs[-12000:]
    assert all(r["resumed_from"] is not None and r["resumed_from"] >= saved for r in results), (results, saved)
    assert RESUMED in done["ptf-worker-1"].log, logs[-12000:]  # the new pod started from the snapshot
