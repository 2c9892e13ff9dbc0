"""A rendered Kubernetes manifest runs as containers: the pods its operator would create
(operator model), each with the manifest's own args and no shell, form one gloo group.
One manifest per operator: Volcano, training-operator, Trainer v2, LeaderWorkerSet, JobSet.
This is the path `invoke demo --manifest FILE` takes."""

from __future__ import annotations

import pytest

from torchpod_toolkit.cluster import demo, runner
from torchpod_toolkit.manifests.render import render
from torchpod_toolkit.manifests.spec import JobSpec

from cluster_helpers import EXAMPLES, LABEL, NODE_ENV, assert_group

CHECK = (f"{EXAMPLES}/allreduce_check.py", "--expect-world", "2", "--expect-nodes", "2")


@pytest.mark.parametrize("scheduler, rdma", [
    ("volcano", "hostnetwork"),  # OKE style: hostnames are the nodes', listed names connect
    ("kubeflow-elastic", "hostnetwork"),  # REPLICA_INDEX/POD_NAME from the downward API
    ("trainer", "none"),
    ("lws", "none"),  # LWS_* from the controller; the leader is node 0
    ("jobset", "hostnetwork"),  # --nnodes in the args, JobSet's labels by the downward API
])
def test_rendered_manifest_runs_as_containers(scheduler, rdma, tmp_path, docker_client, cluster_image,
                                              test_label):
    name = f"m-{test_label[LABEL][:6]}"
    (out,) = [o for o in render(JobSpec(scheduler, 2, "registry.example.com/torchpod/pytorch:2.13.0",
                                        CHECK, name=name, gpus_per_node=0, rdma=rdma)) if o.name.endswith(".yaml")]
    path = tmp_path / out.name
    path.write_text(out.text)
    topo = demo.load_manifest(str(path))
    # the entrypoint does the rest; a JobSet's pods also say --nnodes, which no pod of theirs can tell
    assert all(n.command[:2] == ("run", "--") or n.command[:4] == ("run", "--nnodes", "2", "--") for n in topo.nodes)
    with runner.Cluster(docker_client, cluster_image, topo, [], test_label, env=dict(NODE_ENV)) as cl:
        cl.start()
        assert_group(cl, cl.wait(180), world=2, nodes=2)
    runner.sweep(docker_client, LABEL, test_label[LABEL])


@pytest.mark.parametrize("scheduler", ["volcano", "trainer"])
def test_a_restricted_manifest_trains_as_its_pods_user_on_a_read_only_root(scheduler, tmp_path, docker_client,
                                                                              cluster_image, test_label):
    """Pod Security 'restricted' as the harness applies it (nodes.security_of): UID 1000
    with no passwd entry, read-only root with the pod's /tmp emptyDir, every capability
    dropped, no new privileges. The launcher finds its HOME under /tmp (torchpod.home)."""
    name = f"r-{test_label[LABEL][:6]}"
    (out,) = [o for o in render(JobSpec(scheduler, 2, "registry.example.com/torchpod/pytorch:2.13.0", CHECK,
                                        name=name, gpus_per_node=0, pod_security="restricted"))
              if o.name.endswith(".yaml")]
    assert "# Pod Security: namespace level 'restricted'" in out.text
    path = tmp_path / out.name
    path.write_text(out.text)
    topo = demo.load_manifest(str(path))
    with runner.Cluster(docker_client, cluster_image, topo, [], test_label, env=dict(NODE_ENV)) as cl:
        cl.start()
        codes = cl.wait(180)
        config = [run.container.attrs for run in cl.nodes]
        assert_group(cl, codes, world=2, nodes=2)
    for attrs in config:
        host = attrs["HostConfig"]
        assert attrs["Config"]["User"] == "1000:1000" and host["ReadonlyRootfs"] is True
        assert host["CapDrop"] == ["ALL"] and "no-new-privileges" in host["SecurityOpt"] and "/tmp" in host["Tmpfs"]
    runner.sweep(docker_client, LABEL, test_label[LABEL])
