"""The kubelet stand-in (torchpod_toolkit.kube.kubelet) under the real control plane: two
Nodes that advertise GPUs and RDMA register with their own certificates and keep their
Leases fresh; pods the real scheduler binds to them run as containers of the torchpod image
with the environment the kubelet would give them; a failing command, a missing ConfigMap key,
a capability docker refuses and a deletion end as the kubelet reports them; a pod running as
a user on a read-only root restarts on failure with its memory emptyDir kept; the real Job
controller's Indexed Job runs to Complete with its pods finding each other by their headless
Service names; an image absent from the engine is pulled from a registry on this machine
as its imagePullPolicy says, each step an event worded as the kubelet words it, and one
that cannot be had waits ErrImageNeverPull or ErrImagePull, then ImagePullBackOff; and
stopping the stand-in leaves no container, volume or network.

Without the control plane's programs the tests fail under CI (TORCHPOD_REQUIRE_TOOLS=1) and
skip elsewhere, naming `invoke kube.build`; without the image (the cluster tier's
``cluster_image``) they fail."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import uuid

import pytest
import yaml

from torchpod_toolkit.kube import kubelet as kubelet_mod

import registry_helpers
from cluster_helpers import LABEL, label_value
from kube_helpers import until


@pytest.fixture(scope="module")
def nodes(kube, docker_client, cluster_image, session_id):
    """The stand-in with two nodes, stopped after the module; nothing it made may remain."""
    running = kubelet_mod.Kubelet(kube.plane, docker_client, nodes=2, labels={LABEL: label_value(session_id)},
                                  version=kube.plan.kubernetes).start()
    until("both nodes Ready", lambda: all(_ready(kube, n) for n in running.names))
    yield running
    running.stop()
    made = {"label": f"{kubelet_mod.LABEL}={running.id}"}
    assert not docker_client.containers.list(all=True, filters=made), "a container outlived Kubelet.stop()"
    assert not docker_client.networks.list(filters=made), "a network outlived Kubelet.stop()"
    assert not docker_client.volumes.list(filters=made), "a volume outlived Kubelet.stop()"


def _ready(kube, name: str) -> bool:
    found = kube.kubectl("get", "node", name, "-o", "json", check=False)
    if found.returncode != 0:
        return False
    conditions = json.loads(found.stdout)["status"].get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _pod(kube, namespace: str, name: str) -> dict:
    found = kube.kubectl("-n", namespace, "get", "pod", name, "-o", "json", check=False)
    return json.loads(found.stdout) if found.returncode == 0 else {}


def _phase(kube, namespace: str, name: str, *phases: str, nodes=None) -> dict:
    """The pod once its phase is one of ``phases``; else the test fails with its status and
    what the stand-in met."""
    deadline, pod = time.monotonic() + 180, {}
    while time.monotonic() < deadline:
        pod = _pod(kube, namespace, name)
        if pod.get("status", {}).get("phase") in phases:
            return pod
        time.sleep(0.5)
    pytest.fail(f"pod {namespace}/{name} not in {phases} within 180 s; status {json.dumps(pod.get('status'))[:3000]}"
                f"; the stand-in met {nodes.errors if nodes else '(not asked)'}")


def _apply(kube, namespace: str, *objects: dict) -> None:
    kube.kubectl("-n", namespace, "apply", "-f", "-", stdin=yaml.safe_dump_all(objects))


def _container(image: str, command: list[str], **extra) -> dict:
    return {"name": "main", "image": image, "imagePullPolicy": "Never", "command": command,
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}},
            **extra}


def _logs(docker_client, pod: dict, container: str = "main") -> str:
    status = next(s for s in pod["status"]["containerStatuses"] if s["name"] == container)
    return docker_client.containers.get(status["containerID"].split("//", 1)[1]).logs().decode("utf-8", "replace")


def test_nodes_advertise_gpus_and_rdma_and_renew_their_leases(kube, nodes):
    node = json.loads(kube.kubectl("get", "node", nodes.names[0], "-o", "json").stdout)
    allocatable = node["status"]["allocatable"]
    assert allocatable["nvidia.com/gpu"] == "8"
    assert all(allocatable[name] == "1" for name in kubelet_mod.rdma_resources()) and kubelet_mod.rdma_resources()
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == nodes.names[0]

    def renewed_at() -> str:
        lease = kube.kubectl("-n", "kube-node-lease", "get", "lease", nodes.names[0], "-o", "json").stdout
        return json.loads(lease)["spec"]["renewTime"]

    first = renewed_at()
    assert until("the lease renewed", lambda: renewed_at() != first, seconds=30)
    # a node's identity reads only the Secrets its pods name (the Node authorizer)
    assert kube.kubectl("auth", "can-i", "--as", f"system:node:{nodes.names[0]}", "--as-group", "system:nodes",
                        "-n", "default", "get", "secret", "anything", check=False).returncode != 0


def test_a_pod_gets_its_environment_and_succeeds(kube, nodes, cluster_image, docker_client):
    kube.namespace("plain")
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"greeting": "hello"}}
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token"}, "stringData": {"value": "s3cret"}}
    env = [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
           {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
           {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
           {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
           {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "greeting"}}},
           {"name": "SECRET", "valueFrom": {"secretKeyRef": {"name": "token", "key": "value"}}},
           {"name": "BOTH", "value": "$(GREETING)-$(POD)"}]
    script = 'echo "pod=$POD node=$NODE app=$APP ip=$IP greeting=$GREETING secret=$SECRET both=$BOTH arg=$1"; ' \
             'echo "k8s=$KUBERNETES_SERVICE_HOST"; cat /var/run/secrets/kubernetes.io/serviceaccount/namespace'
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hello", "labels": {"app": "demo"}},
           "spec": {"restartPolicy": "Never",
                    "containers": [_container(cluster_image, ["sh", "-c", script, "sh"], env=env,
                                              args=["$(POD)"])]}}
    _apply(kube, "plain", config, secret, pod)
    done = _phase(kube, "plain", "hello", "Succeeded", "Failed", nodes=nodes)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    state = done["status"]["containerStatuses"][0]["state"]["terminated"]
    assert state["exitCode"] == 0 and state["reason"] == "Completed"
    log = _logs(docker_client, done)
    assert (f"pod=hello node={done['spec']['nodeName']} app=demo ip={done['status']['podIP']} greeting=hello "
            f"secret=s3cret both=hello-hello arg=hello") in log, log
    assert "k8s=10.0.0.1" in log and log.rstrip().endswith("plain"), log
    kinds = {c["type"]: c["status"] for c in done["status"]["conditions"]}
    assert kinds["PodScheduled"] == "True" and kinds["Initialized"] == "True" and kinds["Ready"] == "False"


def test_a_failing_command_fails_the_pod_with_its_exit_code(kube, nodes, cluster_image):
    kube.namespace("failing")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "three"},
           "spec": {"restartPolicy": "Never",
                    "initContainers": [_container(cluster_image, ["true"]) | {"name": "init"}],
                    "containers": [_container(cluster_image, ["sh", "-c", "exit 3"])]}}
    _apply(kube, "failing", pod)
    done = _phase(kube, "failing", "three", "Succeeded", "Failed", nodes=nodes)
    assert done["status"]["phase"] == "Failed"
    state = done["status"]["containerStatuses"][0]["state"]["terminated"]
    assert state["exitCode"] == 3 and state["reason"] == "Error"
    assert done["status"]["initContainerStatuses"][0]["state"]["terminated"]["exitCode"] == 0


def test_a_missing_configmap_key_never_starts_the_container(kube, nodes, cluster_image, docker_client):
    kube.namespace("hostile")
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"present": "x"}}
    env = [{"name": "ABSENT", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "absent"}}}]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "broken"},
           "spec": {"restartPolicy": "Never", "containers": [_container(cluster_image, ["true"], env=env)]}}
    _apply(kube, "hostile", config, pod)

    def config_error():
        statuses = _pod(kube, "hostile", "broken").get("status", {}).get("containerStatuses") or []
        waiting = statuses[0]["state"].get("waiting", {}) if statuses else {}
        return waiting if waiting.get("reason") == "CreateContainerConfigError" else None

    waiting = until("CreateContainerConfigError", config_error, seconds=120)
    assert waiting["message"] == "couldn't find key absent in ConfigMap hostile/cfg"
    time.sleep(3)
    found = _pod(kube, "hostile", "broken")
    assert found["status"]["phase"] == "Pending"
    mine = [f"io.kubernetes.pod.uid={found['metadata']['uid']}", "io.kubernetes.container.name=main"]
    started = docker_client.containers.list(all=True, filters={"label": mine})
    assert not started, [c.name for c in started]


def test_a_container_docker_refuses_waits_with_create_container_error(kube, nodes, cluster_image):
    kube.namespace("refused")
    security = {"capabilities": {"add": ["NOT_A_CAPABILITY"]}}  # the API takes any name; docker does not
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "odd"},
           "spec": {"restartPolicy": "Never", "containers": [_container(cluster_image, ["true"],
                                                                        securityContext=security)]}}
    _apply(kube, "refused", pod)

    def refused():
        statuses = _pod(kube, "refused", "odd").get("status", {}).get("containerStatuses") or []
        waiting = statuses[0]["state"].get("waiting", {}) if statuses else {}
        return waiting if waiting.get("reason") == "CreateContainerError" else None

    waiting = until("CreateContainerError", refused, seconds=120)
    assert "NOT_A_CAPABILITY" in waiting["message"], waiting
    assert _pod(kube, "refused", "odd")["status"]["phase"] == "Pending"


def test_a_deleted_running_pod_leaves_no_container(kube, nodes, cluster_image, docker_client):
    kube.namespace("deleting")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sleeper"},
           "spec": {"restartPolicy": "Always", "terminationGracePeriodSeconds": 5,
                    "containers": [_container(cluster_image, ["sh", "-c", "trap 'exit 0' TERM; sleep 300 & wait"])]}}
    _apply(kube, "deleting", pod)
    running = _phase(kube, "deleting", "sleeper", "Running", nodes=nodes)
    uid = running["metadata"]["uid"]
    assert docker_client.containers.list(filters={"label": f"io.kubernetes.pod.uid={uid}"})
    kube.kubectl("-n", "deleting", "delete", "pod", "sleeper", "--wait=false")
    until("the pod finalised", lambda: not _pod(kube, "deleting", "sleeper"), seconds=90)
    assert not docker_client.containers.list(all=True, filters={"label": f"io.kubernetes.pod.uid={uid}"})


RESTART_SCRIPT = """
id -u; touch /cannot-write 2>/dev/null && echo "root filesystem writable"
df -k /scratch | tail -1
if [ -e /scratch/ran-once ]; then echo second; exit 0; fi
touch /scratch/ran-once; echo first; exit 1
"""


def test_a_restricted_pod_restarts_on_failure_keeping_its_memory_volume(kube, nodes, cluster_image, docker_client):
    kube.namespace("restarts")
    security = {"runAsUser": 1000, "runAsGroup": 1000, "runAsNonRoot": True, "readOnlyRootFilesystem": True,
                "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "again"},
           "spec": {"restartPolicy": "OnFailure",
                    "volumes": [{"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}}],
                    "containers": [_container(cluster_image, ["sh", "-c", RESTART_SCRIPT], securityContext=security,
                                              volumeMounts=[{"name": "scratch", "mountPath": "/scratch"}])]}}
    _apply(kube, "restarts", pod)
    done = _phase(kube, "restarts", "again", "Succeeded", "Failed", nodes=nodes)
    main = done["status"]["containerStatuses"][0]
    assert done["status"]["phase"] == "Succeeded" and main["restartCount"] == 1, done["status"]
    assert main["lastState"]["terminated"]["exitCode"] == 1 and main["state"]["terminated"]["exitCode"] == 0
    log = _logs(docker_client, done)
    assert log.startswith("1000\n") and "second" in log and "writable" not in log, log
    assert " 16384 " in log, log  # the tmpfs holds sizeLimit


JOB_SCRIPT = """
import os, socket, sys, time
index, peer = int(os.environ["JOB_COMPLETION_INDEX"]), os.environ["PEER"]
if index == 1:
    server = socket.create_server(("0.0.0.0", 29500))
    server.settimeout(150)
    conn, _ = server.accept()
    print("pod 1 heard", conn.recv(64).decode(), flush=True)
    sys.exit(0)
deadline = time.time() + 150
while True:
    try:
        with socket.create_connection((peer, 29500), timeout=5) as conn:
            conn.sendall(b"hello from pod 0")
        print("pod 0 resolved", peer, "to", socket.gethostbyname(peer), flush=True)
        sys.exit(0)
    except OSError as exc:
        if time.time() > deadline:
            print("pod 0 gave up:", exc, flush=True)
            sys.exit(1)
        time.sleep(1)
"""


def test_an_indexed_job_finds_its_peer_by_dns_and_completes(kube, nodes, cluster_image, docker_client):
    kube.namespace("indexed")
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "peers"},
               "spec": {"clusterIP": "None", "selector": {"batch.kubernetes.io/job-name": "pair"},
                        "ports": [{"name": "c10d", "port": 29500}]}}
    env = [{"name": "PEER", "value": "pair-1.peers"}]
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pair"},
           "spec": {"completions": 2, "parallelism": 2, "completionMode": "Indexed", "backoffLimit": 0,
                    "template": {"spec": {"subdomain": "peers", "restartPolicy": "Never",
                                          "containers": [_container(cluster_image, ["python3", "-c", JOB_SCRIPT],
                                                                    env=env)]}}}}
    _apply(kube, "indexed", service, job)

    def finished():
        found = json.loads(kube.kubectl("-n", "indexed", "get", "job", "pair", "-o", "json").stdout)
        kinds = {c["type"]: c["status"] for c in found.get("status", {}).get("conditions") or []}
        return kinds if kinds.get("Complete") == "True" or kinds.get("Failed") == "True" else None

    verdict = until("the Job finished", finished, seconds=240)
    pods = json.loads(kube.kubectl("-n", "indexed", "get", "pods", "-o", "json").stdout)["items"]
    logs = {p["spec"]["hostname"]: _logs(docker_client, p) for p in pods}
    assert verdict.get("Complete") == "True", (verdict, logs)
    assert "pod 0 resolved pair-1.peers" in logs["pair-0"] and "pod 1 heard hello from pod 0" in logs["pair-1"]


# --- images: pulled as imagePullPolicy says, and told as events -------------------------------

@pytest.fixture(scope="module")
def pushed(require_tool, docker_client, tmp_path_factory):
    """A registry on this machine holding a small image (busybox as its sh and sleep) that the
    engine does not hold: pushed, then removed here, so that a pod of it needs a real pull."""
    binary = require_tool("docker-registry", "docker-registry")
    busybox = require_tool("busybox", "busybox-static")
    folder = tmp_path_factory.mktemp("pull-registry")
    context = folder / "context"
    context.mkdir()
    shutil.copy(busybox, context / "busybox")
    (context / "Dockerfile").write_text("FROM scratch\nCOPY busybox /bin/sh\nCOPY busybox /bin/sleep\n")
    with registry_helpers.serving(binary, folder / "registry", registry_helpers.free_port()) as address:
        ref = f"{address}/torchpod-test/pulled:{uuid.uuid4().hex[:12]}"
        subprocess.run(["docker", "build", "-q", "-t", ref, str(context)], check=True, capture_output=True)
        subprocess.run(["docker", "push", ref], check=True, capture_output=True)
        docker_client.images.remove(ref, force=True)
        assert not docker_client.images.list(name=ref.rsplit(":", 1)[0]), "the pushed image is still here"
        yield ref, address
        docker_client.images.remove(ref, force=True)


def _events(kube, namespace: str, pod: str) -> list[tuple[str, str, str]]:
    found = json.loads(kube.kubectl("-n", namespace, "get", "events", "-o", "json").stdout)["items"]
    return [(e["type"], e["reason"], e["message"]) for e in found
            if e["involvedObject"].get("name") == pod and e["source"].get("component") == "kubelet"]


def _waiting(kube, namespace: str, pod: str, reason: str):
    def seen():
        statuses = _pod(kube, namespace, pod).get("status", {}).get("containerStatuses") or []
        waiting = statuses[0]["state"].get("waiting", {}) if statuses else {}
        return waiting if waiting.get("reason") == reason else None
    return until(reason, seen, seconds=120)


def test_an_absent_image_is_pulled_from_the_registry_and_each_step_is_an_event(kube, nodes, pushed, docker_client):
    ref, _ = pushed
    kube.namespace("pull")
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
             "spec": {"restartPolicy": "Never", "nodeName": nodes.names[0],
                      "containers": [_container(ref, ["sh", "-c", "echo ran"], imagePullPolicy="IfNotPresent")]}}
            for name in ("first", "second")]
    _apply(kube, "pull", pods[0])
    done = _phase(kube, "pull", "first", "Succeeded", "Failed", nodes=nodes)
    assert done["status"]["phase"] == "Succeeded" and _logs(docker_client, done).strip() == "ran"
    said = _events(kube, "pull", "first")
    assert ("Normal", "Pulling", f'Pulling image "{ref}"') in said, said
    (pulled,) = [m for _, reason, m in said if reason == "Pulled"]
    size = docker_client.images.get(ref).attrs["Size"]
    assert re.fullmatch(rf'Successfully pulled image "{re.escape(ref)}" in [0-9.]+m?s \([0-9.]+m?s including '
                        rf"waiting\)\. Image size: {size} bytes\.", pulled), pulled
    _apply(kube, "pull", pods[1])  # the image is on the machine now: not pulled again
    assert _phase(kube, "pull", "second", "Succeeded", "Failed", nodes=nodes)["status"]["phase"] == "Succeeded"
    assert [r for _, r, _ in _events(kube, "pull", "second")].count("Pulling") == 0
    assert ("Normal", "Pulled", f'Container image "{ref}" already present on machine and can be accessed by the '
            "pod") in _events(kube, "pull", "second")


def test_an_image_that_cannot_be_had_waits_with_the_kubelets_reasons(kube, nodes, pushed):
    _, address = pushed
    kube.namespace("nopull")
    absent = f"{address}/torchpod-test/never-pushed:1"
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
             "spec": {"restartPolicy": "Never", "containers": [_container(absent, ["true"], imagePullPolicy=policy)]}}
            for name, policy in (("never", "Never"), ("missing", "IfNotPresent"))]
    _apply(kube, "nopull", *pods)
    never = _waiting(kube, "nopull", "never", "ErrImageNeverPull")
    assert never["message"] == f'Container image "{absent}" is not present with pull policy of Never'
    assert ("Warning", "ErrImageNeverPull", never["message"]) in _events(kube, "nopull", "never")
    failed = _waiting(kube, "nopull", "missing", "ImagePullBackOff")  # after one ErrImagePull
    assert failed["message"].startswith(f'Back-off pulling image "{absent}": ErrImagePull: ') and \
        "manifest unknown" in failed["message"], failed
    said = _events(kube, "nopull", "missing")
    assert [m for t, r, m in said if (t, r) == ("Warning", "Failed")][0].startswith(f'Failed to pull image "{absent}"')
    assert ("Normal", "BackOff", f'Back-off pulling image "{absent}"') in said
    assert {_pod(kube, "nopull", n)["status"]["phase"] for n in ("never", "missing")} == {"Pending"}
