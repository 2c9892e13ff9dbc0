"""Two things on a second real control plane, beside test_kube_jobs.py's so that the tier's
workers share them: Kueue's topology-aware scheduling, and the hang watch's verdict where
Kubernetes shows it.

Kueue: a site's nodes labelled by block, Kueue v0.17.0 with a Topology, a ResourceFlavor and
a ClusterQueue, and jobs as `invoke manifests` renders them, edited as their user asks Kueue
for a placement. Kueue decides where the pods go; torchpod's ranks must keep each placed
slice together.

The hang watch (torchpod.watch): a JobSet and a PyTorchJob whose rank 1 stalls before the
collective; every pod's torchpod names it, its host and its frame, and ends with 124; the
kubelet stand-in reads each container's termination message as the kubelet does, so the
pods' status, and `kubectl describe pod`, show the verdict.

The plane runs Kueue, training-operator and JobSet (tests/kube_jobs.py holds what both
modules use). Without the control plane's or an operator's programs the tests fail under
CI (TORCHPOD_REQUIRE_TOOLS=1) and skip elsewhere, naming `invoke kube.build`."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from cluster_helpers import EXAMPLES
from kube_helpers import until
from kube_jobs import WAIT, Cluster, assert_one_group, condition, hostname, start, submit, wait

OPERATORS = ("training-operator", "jobset", "kueue")
# The nodes' topology, as a site labels its nodes for Kueue's topology-aware scheduling: three
# blocks of two nodes, named so that node order is not topology order (node 0 and node 4 share
# block-c, node 1 and node 3 block-a).
BLOCK, POOL = "cloud.example.com/block", "cloud.example.com/pool"
BLOCKS = {"torchpod-node-0": "block-c", "torchpod-node-1": "block-a", "torchpod-node-2": "block-b",
          "torchpod-node-3": "block-a", "torchpod-node-4": "block-c", "torchpod-node-5": "block-b"}


@pytest.fixture(scope="module")
def cluster(kube, docker_client, cluster_image, session_id, tmp_path_factory) -> Iterator[Cluster]:
    """Six nodes in three blocks and training-operator, JobSet and Kueue on the module's
    plane, stopped after the module."""
    labels = {node: {BLOCK: block, POOL: "tas"} for node, block in BLOCKS.items()}
    yield from start(kube, docker_client, cluster_image, session_id, tmp_path_factory, OPERATORS, labels,
                     nodes=len(BLOCKS))


KUEUE = "kueue.x-k8s.io/v1beta2"
# Kueue v0.17.0's topology annotations on a pod template (apis/kueue/v1beta2/topology_types.go)
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
SLICE_REQUIRED, SLICE_SIZE = "kueue.x-k8s.io/podset-slice-required-topology", "kueue.x-k8s.io/podset-slice-size"
GROUP = "kueue.x-k8s.io/podset-group-name"
CPU = "10"  # more than half a node's 16: each node holds one pod of a queued job


@pytest.fixture(scope="module")
def kueue(cluster: Cluster) -> Cluster:
    """A Topology of the nodes' block and hostname labels, a ResourceFlavor on it and a
    ClusterQueue with room for any job here (kueue v0.17.0, apis/kueue/v1beta2; the
    topology-aware scheduling guide's objects)."""
    objects = [
        {"apiVersion": KUEUE, "kind": "Topology", "metadata": {"name": "blocks"},
         "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": "kubernetes.io/hostname"}]}},
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "tas"},
         "spec": {"nodeLabels": {POOL: "tas"}, "topologyName": "blocks"}},
        {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "tas"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [
             {"name": "tas", "resources": [{"name": "cpu", "nominalQuota": "100"},
                                           {"name": "memory", "nominalQuota": "1000Gi"}]}]}]}},
    ]
    path = cluster.folder / "kueue-queues.yaml"
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    cluster.kube.kubectl("apply", "--server-side", "-f", str(path))
    return cluster


def queued(namespace: str, annotations: dict[str, str]) -> Any:
    """An edit of a rendered job, as its user asks Kueue for a placement: a LocalQueue first,
    the job in that queue (kueue.x-k8s.io/queue-name), ``annotations`` on each pod template
    and each container asking for CPU more than half a node's."""
    def edit(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        queue = {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "tas", "namespace": namespace},
                 "spec": {"clusterQueue": "tas"}}
        for doc in docs:
            if doc["kind"] == "JobSet":
                pods = [rjob["template"]["spec"]["template"] for rjob in doc["spec"]["replicatedJobs"]]
            elif doc["kind"] == "PyTorchJob":
                pods = [spec["template"] for spec in doc["spec"]["pytorchReplicaSpecs"].values()]
            else:
                continue
            doc["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = "tas"
            for pod in pods:
                pod.setdefault("metadata", {}).setdefault("annotations", {}).update(annotations)
                for container in pod["spec"]["containers"]:
                    container["resources"]["requests"]["cpu"] = container["resources"]["limits"]["cpu"] = CPU
        return [queue, *docs]
    return edit


def placed(cluster: Cluster, namespace: str, results: list[dict[str, Any]]) -> list[str]:
    """Each rank's block, in rank order, once every pod sat on a node of its own; and Kueue
    placed them: its Workload's admission holds a topology assignment per pod set naming
    each node (by its lowest level, the hostname: Kueue keeps only that level when it is the
    node's; the compact form of apis/kueue/v1beta2 TopologyAssignment: slices of values
    sharing a prefix, or one universal value for a slice of one domain)."""
    pods = json.loads(cluster.kube.kubectl("-n", namespace, "get", "pods", "-o", "json").stdout)["items"]
    node_of = {hostname(p): p["spec"]["nodeName"] for p in pods}
    assert len(set(node_of.values())) == len(node_of) == len(results), node_of  # a pod per node
    (workload,) = json.loads(cluster.kube.kubectl("-n", namespace, "get", "workloads.kueue.x-k8s.io", "-o",
                                                  "json").stdout)["items"]
    names = []
    for assigned in workload["status"]["admission"]["podSetAssignments"]:
        topology = assigned["topologyAssignment"]
        assert topology["levels"][-1] == "kubernetes.io/hostname", topology
        for piece in topology["slices"]:
            values = piece["valuesPerLevel"][-1]  # one value for every domain, or one each
            one = values.get("individual") or {"roots": [values["universal"]]}
            names += [f"{one.get('prefix', '')}{root}{one.get('suffix', '')}" for root in one["roots"]]
    assert sorted(names) == sorted(node_of.values()), (names, node_of)
    return [BLOCKS[node_of[r["hostname"]]] for r in sorted(results, key=lambda r: r["rank"])]


def test_kueue_places_a_jobset_in_slices_of_one_block_and_each_slice_ranks_together(kueue):
    """Kueue v0.17.0's topology-aware scheduling admits a JobSet of four that requires each
    slice of two pods in one block (podset-slice-required-topology, podset-slice-size): two
    blocks of the three hold two pods each, and Kueue gives the pod indexes to the slices in
    order (its rank-based ordering for JobSet pods), so the ranks torchpod gives (the pod
    index) keep each block's nodes together: ranks 0 and 1 share a block, 2 and 3 another.
    Node names do not follow the blocks, and neither does the scheduler's spreading."""
    submit(kueue, "jobset", "tas", 4, edit=queued("tas", {SLICE_REQUIRED: BLOCK, SLICE_SIZE: "2"}))
    wait(kueue, "tas", "jobsets.jobset.x-k8s.io", "tas", "JobSet condition Completed",
         condition(kueue, "tas", "jobsets.jobset.x-k8s.io", "tas", "Completed"))
    blocks = placed(kueue, "tas", assert_one_group(kueue, "tas", world=4, nodes=4))
    assert blocks[0] == blocks[1] != blocks[2] == blocks[3], blocks


def test_kueue_places_a_pytorchjob_that_requires_one_block_and_it_trains_there(kueue):
    """A PyTorchJob of a Master and a Worker that requires one block (podset-required-topology
    on both replica types, one podset-group-name so that Kueue fits the two pod sets in one
    domain together: jobframework/tas.go): both pods land in one block of two nodes and
    torch ranks the Master 0 and the Worker 1, as the launchers named them."""
    submit(kueue, "kubeflow", "tasp", 2, edit=queued("tasp", {REQUIRED: BLOCK, GROUP: "trainers"}))
    wait(kueue, "tasp", "pytorchjobs.kubeflow.org", "tasp", "PyTorchJob condition Succeeded",
         condition(kueue, "tasp", "pytorchjobs.kubeflow.org", "tasp", "Succeeded"))
    results = assert_one_group(kueue, "tasp", world=2, nodes=2)
    assert [r["hostname"] for r in sorted(results, key=lambda r: r["rank"])] == ["tasp-master-0", "tasp-worker-0"]
    blocks = placed(kueue, "tasp", results)
    assert len(set(blocks)) == 1, blocks


# the verdict's lines (torchpod.watch.judge.lines), for a culprit that stalled in allreduce_check
CULPRIT = re.compile(r"torchpod: hang: culprit rank 1 on (?P<host>[^:\s]+): never entered it; last in collective "
                     r"\d+ \([^)]*\); now in /opt/torchpod/examples/allreduce_check.py:\d+ in "
                     r"stall_before_the_collective")


def hang_messages(cluster: Cluster, namespace: str) -> dict[tuple[str, str], str]:
    """Each pod's termination message of an attempt that ended 124 (its state or, once
    restarted in place, its last state), by the pod's (hostname, name)."""
    pods = json.loads(cluster.kube.kubectl("-n", namespace, "get", "pods", "-o", "json").stdout)["items"]
    found = {}
    for pod in pods:
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            for state in (status.get("state") or {}, status.get("lastState") or {}):
                ended = state.get("terminated") or {}
                if ended.get("exitCode") == 124:
                    found[hostname(pod), pod["metadata"]["name"]] = ended.get("message", "")
    return found


def test_a_hung_rank_is_named_in_the_pods_termination_messages(cluster):
    """A JobSet and a PyTorchJob of two nodes, side by side, TORCHPOD_STALL_WINDOW=10 set
    through the render (--env): rank 1 stalls before the all-reduce rank 0 waits in. The
    pods' containers end with 124, and their termination messages, read by the kubelet
    stand-in from the file bound at /dev/termination-log (kubernetes v1.37.2,
    kuberuntime_container.go), name rank 1, the host it runs on (the JobSet's pod of index
    1, the PyTorchJob's Worker) and its frame. The PyTorchJob restarts in place (OnFailure),
    keeping each pod's message in its last state: both pods' are read. The JobSet's first
    failed pod fails its one Job (backoffLimit 0) and the JobSet (restarts set to none, as a
    user who wants the evidence kept would), and the Job controller ends the other pod, so
    at least one pod's message is read. `kubectl describe pod` shows the message."""
    stall = (f"{EXAMPLES}/allreduce_check.py", "--stall-rank", "1")

    def no_restart(docs):
        for doc in docs:
            if doc["kind"] == "JobSet":
                doc["spec"]["failurePolicy"]["maxRestarts"] = 0
        return docs

    # namespace: (kind, the object to delete, the pods read, rank 1's hostname)
    jobs = {"hang-js": ("jobset", "jobsets.jobset.x-k8s.io", 1, "hang-js-node-0-1"),
            "hang-pt": ("kubeflow", "pytorchjobs.kubeflow.org", 2, "hang-pt-worker-0")}
    for namespace, (kind, *_) in jobs.items():
        submit(cluster, kind, namespace, 2, stall, edit=no_restart, env=("TORCHPOD_STALL_WINDOW=10",))
    try:
        for namespace, (_, _, pods, culprit) in jobs.items():
            messages = until(f"{namespace}: {pods} pod(s) ended 124 with a message", lambda ns=namespace, n=pods: (
                found if len(found := {h: m for h, m in hang_messages(cluster, ns).items() if m}) >= n else None),
                seconds=WAIT)
            for message in messages.values():
                named = CULPRIT.search(message)
                assert named and named["host"].split(".")[0] == culprit, messages
                assert message.startswith("torchpod: hang: no rank went past collective"), messages
            # what its user reads: `kubectl describe pod` prints the last state's message
            # (kubectl v1.37.2, pkg/describe/describe.go, describeContainerState: "Message:")
            (_, pod), *_ = messages
            described = cluster.kube.kubectl("-n", namespace, "describe", "pod", pod).stdout
            assert re.search(r"Exit Code:\s+124", described), described
            assert "torchpod: hang: culprit rank 1 on" in described, described
    finally:
        for namespace, (_, plural, *_) in jobs.items():
            cluster.kube.kubectl("-n", namespace, "delete", plural, "--all")
