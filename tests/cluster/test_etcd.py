"""etcd-v2 rendezvous against a real etcd (Debian's etcd-server, v2 API on), the way the
OCI OKE PyTorch recipes run it (an etcd-server-headless Service): two Volcano jobs share
one etcd on one network, each forms its own group and never the other's (their
rendezvous ids come from their job names)."""

from __future__ import annotations

import time

import pytest

from cluster_helpers import EXAMPLES, assert_group, assert_ranks_are_the_named_nodes

READY = b"ready to serve client requests"


@pytest.fixture
def etcd(docker_client, cluster_image, shared_network, test_label, dev_volumes, require_tool):
    """etcd from the host's etcd-server package (a static binary) in a container of the
    image, reachable as etcd-server-headless:2379 on the shared network."""
    etcd_bin = require_tool("etcd", "etcd-server")
    probe = docker_client.containers.run(
        cluster_image, ["-c", "import etcd"], entrypoint="/opt/venv/bin/python", remove=False,
        detach=True, labels=test_label, volumes=dev_volumes,
        environment={"PYTHONPATH": "/opt/dev-site"})
    code = probe.wait(timeout=120)["StatusCode"]
    probe.remove(force=True)
    if code != 0:
        pytest.fail("the image has no python-etcd (`import etcd`), which torch's etcd-v2 rendezvous "
                    "imports; add python-etcd to extra_packages in images/pytorch.yaml")
    server = docker_client.containers.run(
        cluster_image,
        ["--enable-v2", "--name", "etcd-server", "--data-dir", "/tmp/etcd",
         "--listen-client-urls", "http://0.0.0.0:2379",
         "--advertise-client-urls", "http://etcd-server-headless:2379",
         "--listen-peer-urls", "http://127.0.0.1:2380"],
        entrypoint="/usr/bin/etcd", detach=True, labels=test_label, network=shared_network,
        name=f"tp-etcd-{test_label['torchpod.test']}", hostname="etcd-server",
        volumes={etcd_bin: {"bind": "/usr/bin/etcd", "mode": "ro"}},
        networking_config={shared_network: docker_client.api.create_endpoint_config(
            aliases=["etcd-server-headless"])},
    )
    deadline = time.time() + 30
    while READY not in server.logs() and time.time() < deadline:
        time.sleep(0.3)
    if READY not in server.logs():
        log = server.logs().decode(errors="replace")[-3000:]
        server.remove(force=True)
        pytest.fail(f"etcd never became ready in 30 s; its log:\n{log}")
    yield "etcd-server-headless:2379"
    server.remove(force=True)


def test_etcd_v2_two_jobs_share_one_etcd_and_never_join(make_cluster, etcd, shared_network):
    cmd = ["run", "--rdzv-backend", "etcd-v2", "--rdzv-endpoint", etcd,
           f"{EXAMPLES}/allreduce_check.py", "--expect-world", "2", "--expect-nodes", "2"]
    a = make_cluster("volcano", 2, cmd, job="etcd-a", network=shared_network)
    b = make_cluster("volcano", 2, cmd, job="etcd-b", network=shared_network)
    a.start()
    b.start()
    ra = assert_group(a, a.wait(180), world=2, nodes=2)
    rb = assert_group(b, b.wait(180), world=2, nodes=2)
    assert ra[0]["run_id"] != rb[0]["run_id"]
    for cluster, results in ((a, ra), (b, rb)):  # torch's etcd-v2 handler takes torchpod's order too
        assert_ranks_are_the_named_nodes(cluster, results)
    assert set(ra[0]["hosts"]).isdisjoint(rb[0]["hosts"])
