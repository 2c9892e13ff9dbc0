"""Fixtures for the cluster tier: containers of the built x86_64 image play the nodes.

Every container, network and volume a test creates carries ``torchpod.test=<id>`` (one id
per test) and is removed at the test's teardown, pass or fail; a session-final sweep of
the ``torchpod.test`` label catches anything a crash left. The tests use the image as
built. For development only, TORCHPOD_DEV_MOUNT=1 bind-mounts this checkout's launcher and
examples over the image's copies (no rebuild needed), and TORCHPOD_DEV_PYTHONPATH=<dir>
adds a host folder of extra modules (mounted at /opt/dev-site) to the nodes' PYTHONPATH.
"""

from __future__ import annotations

import dataclasses
import os

import pytest

from torchpod_toolkit.cluster import runner, topology
from torchpod_toolkit.kube import plane, planestart

import crowd
from cluster_helpers import LABEL, NODE_ENV, label_value, sweep_session
from kube_helpers import Kube, require_programs
from paths import ROOT

pytestmark = [pytest.mark.cluster, pytest.mark.docker]


# Modules whose tests measure a bandwidth or a CPU's share (preflight's measured pairs, the
# all-reduce bench): marked ``solo``, so that `invoke test` runs them after the rest of the
# tier, with nothing else loading the cores beside them. The fault tests assert times too
# (a rendezvous timeout of 15 s ends the job within 75 s, a lost node's peers re-form within
# the 60 s join timeout, `docker stop` ends within its 20 s grace), each with a margin of
# several times what they take beside other tests, and they run side by side; the test that
# has no such margin (an elastic round re-formed within the join timeout) is marked ``solo``
# where it is written.
SOLO = {"test_preflight.py", "test_bench.py"}


def module_scoped(item) -> bool:
    """Whether the test uses a fixture that lives for its module (a Slurm cluster, a control
    plane): such a module's tests share a worker, so the fixture starts once."""
    return any(defs[-1].scope == "module" for defs in item._fixtureinfo.name2fixturedefs.values()
               if defs and defs[-1].argname != "request")


# A test of this many containers as nodes or more starts a torch process group each: two of
# them side by side on two cores (24 processes importing torch at once) held a twelve-node
# rendezvous past its join timeout. They are ``crowd`` tests: one runs at a time, with its
# turn (tests/crowd.py); those without a module-scoped fixture also share a worker.
MANY_NODES = 8


def many_nodes(item) -> bool:
    callspec = getattr(item, "callspec", None)
    count = callspec.params.get("nodes", 0) if callspec is not None else 0
    return isinstance(count, int) and count >= MANY_NODES


# first: pytest-xdist reads the groups in its own hook of this name, on each worker
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/cluster" in str(item.fspath):
            item.add_marker(pytest.mark.cluster)
            item.add_marker(pytest.mark.docker)
            # under pytest-xdist (--dist loadgroup) the tests of a module with a module-scoped
            # fixture share a worker; every other test goes to whichever worker is free
            if many_nodes(item):
                item.add_marker(pytest.mark.crowd)
            if module_scoped(item):
                item.add_marker(pytest.mark.xdist_group(name=item.path.name))
            elif item.get_closest_marker("crowd"):
                item.add_marker(pytest.mark.xdist_group(name="many-nodes"))
            if item.path.name in SOLO:
                item.add_marker(pytest.mark.solo)


@pytest.fixture(autouse=True)
def crowd_turn(request):
    """A ``crowd`` test runs in its turn: none of the other workers' crowd tests beside it
    (autouse: taken before the test's own fixtures start a container)."""
    if request.node.get_closest_marker("crowd") is None:
        yield
        return
    with crowd.turn(request.node.nodeid) as waited:
        if waited >= 1.0:
            print(f"waited {waited:.0f} s for the crowd's turn")
        yield


@pytest.fixture(scope="session")
def cluster_image(docker_client, definitions, session_id) -> str:
    """The x86_64 ref of the default image; fails (not skips) when it is not built.

    The other CI images (older torch) prove themselves in the image tier, down to a real
    two-process `torchpod run`; the cluster tier runs the image users get by default.
    """
    from torchpod.errors import TorchpodError
    from torchpod_toolkit.imagebuild.definitions import DEFAULT_IMAGE
    from torchpod_toolkit.imagebuild.host import host_arch

    defn = definitions[DEFAULT_IMAGE]
    arch = defn.arch("x86_64")
    if host_arch() != arch:
        pytest.skip(f"cluster tests run the x86_64 image natively; this host is {host_arch().name}")
    ref = defn.ref(arch)
    try:
        runner.image_or_error(docker_client, ref, arch.name)
    except TorchpodError as exc:
        pytest.fail(str(exc))
    if os.environ.get("TORCHPOD_PRUNE_BUILD_CACHE") == "1":
        # CI: what the image tier's builds left in BuildKit's cache (the two-builds test's
        # rebuild: ~13 GB) is freed before the cluster tier builds and runs its nodes
        import subprocess

        from torchpod_toolkit.imagebuild.host import find_builder

        subprocess.run([find_builder().docker, "builder", "prune", "-af"], capture_output=True)
    yield ref
    sweep_session(docker_client, session_id)  # what a crash left; never another session's


@pytest.fixture
def test_label(session_id) -> dict[str, str]:
    return {LABEL: label_value(session_id)}


@pytest.fixture(scope="session")
def dev_volumes(definitions) -> dict:
    from torchpod.contract import setting, switch
    from torchpod_toolkit.imagebuild.definitions import DEFAULT_IMAGE
    from torchpod_toolkit.settings import DEV_MOUNT, DEV_PYTHONPATH

    vols = {}
    if switch(os.environ, DEV_MOUNT):
        vols.update(runner.dev_mounts(ROOT, definitions[DEFAULT_IMAGE].python))
    extra = setting(os.environ, DEV_PYTHONPATH)
    if extra:
        vols[extra] = {"bind": "/opt/dev-site", "mode": "ro"}
    return vols


@pytest.fixture
def make_cluster(docker_client, cluster_image, test_label, dev_volumes):
    """Factory: make_cluster(scenario, nodes, command, **opts) -> runner.Cluster (not started)."""
    made: list[runner.Cluster] = []
    dev_env = {"PYTHONPATH": "/opt/dev-site"} if "/opt/dev-site" in {v["bind"] for v in dev_volumes.values()} else {}

    def make(scenario, nodes, command, *, job=None, nproc=None, host_network=False, env=None,
             volumes=None, network=None, node_files=None, min_nodes=None, descending_addresses=False):
        topo = topology.build(scenario, nodes, job or f"{scenario}-{test_label[LABEL][:6]}",
                              nproc=nproc, host_network=host_network, min_nodes=min_nodes)
        if node_files:  # files only some nodes have (a volume mounted on one node only)
            topo = dataclasses.replace(topo, nodes=tuple(
                dataclasses.replace(n, files=n.files + tuple(node_files.get(n.index, {}).items()))
                for n in topo.nodes))
        cl = runner.Cluster(
            docker_client, cluster_image, topo, command, test_label,
            network=network, volumes={**dev_volumes, **(volumes or {})},
            env={**NODE_ENV, **dev_env, **(env or {})}, descending_addresses=descending_addresses,
        )
        made.append(cl)
        return cl

    yield make
    for cl in made:
        cl.close()
    runner.sweep(docker_client, LABEL, test_label[LABEL])


@pytest.fixture
def shared_network(docker_client, test_label):
    """One Docker network for several jobs (two jobs side by side, etcd beside a job)."""
    net = docker_client.networks.create(f"tp-shared-{test_label[LABEL]}", driver="bridge",
                                        labels=test_label)
    yield net.name
    runner.sweep(docker_client, LABEL, test_label[LABEL])


@pytest.fixture(scope="module")
def kube(tmp_path_factory):
    """A real Kubernetes control plane (torchpod_toolkit.kube.planestart) from the programs
    `invoke kube.build` made, stopped after the module; fails under CI without them."""
    plan = require_programs()
    started = planestart.start(plan.bindir, tmp_path_factory.mktemp("kube") / "plane")
    yield Kube(started, plan)
    plane.stop(started)
    assert not plane.running(started), "a control plane component outlived stop()"
