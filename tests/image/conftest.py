"""Fixtures for testinfra checks inside each built image, one per (image, arch).

The parameter list is derived from images/*.yaml (every ``ci: true`` definition, every
declared arch): a new definition or arch is tested without touching this file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from torchpod_toolkit.imagebuild.definitions import load_definitions
from torchpod_toolkit.imagebuild.host import emulation_volumes, host_arch

import image_runs
from paths import ROOT

DEFS = load_definitions(ROOT / "images")
# Images with a net plugin are their base plus one layer: they get the variant checks
# (test_variants.py) instead of repeating every check of the image they extend.
CASES = [(d, a) for d in DEFS.values() if d.ci and d.aws_ofi_nccl is None for a in d.arches]
VARIANTS = [(d, a) for d in DEFS.values() if d.ci and d.aws_ofi_nccl is not None for a in d.arches]


# The native arch's cases: what a test runs there alone because an emulated arch covers it
# in a test that does more (a two-process run and torchvision: test_least_privilege.py).
NATIVE = [(d, a) for d, a in CASES if a == host_arch()]


# first: pytest-xdist reads the groups in its own hook of this name, on each worker
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """Under pytest-xdist (``invoke test`` runs this tier with ``--dist loadgroup``), every test
    of one image and arch runs on one worker: its containers and its one ``import torch``
    (under QEMU, a minute) are not repeated on another, and the workers split the images."""
    for item in items:
        spec = getattr(item, "callspec", None)
        image = next((spec.params[n] for n in ("built", "variant", "built_native")
                      if spec is not None and n in spec.params), None)
        if image is not None:
            defn, arch = image
            item.add_marker(pytest.mark.xdist_group(name=f"{defn.name}-{arch.name}"))
        elif any(defs[-1].scope == "module" for defs in item._fixtureinfo.name2fixturedefs.values() if defs):
            # a module whose tests share a module-scoped fixture (one registry, one set of tagged
            # images) keeps them on one worker: on two, each would build the same tags and one's
            # teardown would remove what the other's tests still use
            item.add_marker(pytest.mark.xdist_group(name=item.path.name))


def pytest_generate_tests(metafunc):
    for name, cases in (("built", CASES), ("variant", VARIANTS), ("built_native", NATIVE)):
        if name in metafunc.fixturenames:
            metafunc.parametrize(name, cases, ids=[f"{d.name}-{a.name}" for d, a in cases],
                                 indirect=True, scope="module")


class Built:
    """A running container of one built image, with its definition and labels."""

    def __init__(self, defn, arch, image, container, host):
        self.defn, self.arch, self.image, self.container, self.host = defn, arch, image, container, host
        self.labels = image.labels
        self.native = arch == host_arch()

    def run(self, command: str) -> str:
        return self.host.check_output(command)


@pytest.fixture(scope="module")
def variant(request, docker_client, image_test_label):
    yield from _running(request, docker_client, image_test_label)


@pytest.fixture(scope="module")
def built(request, docker_client, image_test_label):
    yield from _running(request, docker_client, image_test_label)


@pytest.fixture(scope="module")
def built_native(request, docker_client, image_test_label):
    yield from _running(request, docker_client, image_test_label)


def _running(request, docker_client, image_test_label):
    import docker
    import testinfra

    defn, arch = request.param
    ref = defn.ref(arch)
    try:
        image = docker_client.images.get(ref)
    except docker.errors.ImageNotFound:
        pytest.fail(f"{ref} is not built; run `invoke build --image {defn.name} --arch {arch.name}`")
    container = docker_client.containers.run(
        ref, ["infinity"], entrypoint="sleep", platform=arch.docker, detach=True,
        labels=image_test_label, network_disabled=True,
        volumes=emulation_volumes(arch, host_arch(), ROOT / ".cache"))
    try:
        yield Built(defn, arch, image, container, testinfra.get_host(f"docker://{container.id}"))
    finally:
        try:
            container.remove(force=True)
        except docker.errors.NotFound:  # already swept by a concurrent session's cleanup
            pass


@pytest.fixture
def facts(built, docker_client, image_test_label) -> dict:
    """What the image's torch says: rank 0 of the image's one training run (tests/image_runs.py)."""
    return image_runs.facts(built, docker_client, image_test_label)


@pytest.fixture(scope="session")
def host_only_certs() -> list[str]:
    """Base64 lines of the CA certificates this host added (e.g. a TLS-intercepting proxy's)."""
    lines = []
    for path in Path("/usr/local/share/ca-certificates").glob("**/*.crt"):
        body = [ln for ln in path.read_text().splitlines() if ln and not ln.startswith("-----")]
        if len(body) > 2:
            lines.append(body[len(body) // 2])  # a line from the middle: unique to that cert
    return lines

