"""`invoke push` against a real registry (Debian's docker-registry, started here).

Pushes every arch of the default image, merges the multi-arch name with the docker CLI this
host has (no buildx here: `docker manifest`; the buildx command is checked in the unit
tier), then pulls each platform back by digest. Also checks that an image never built fails
before any push. Pushes to a repository a site names, with TLS and credentials, run in
test_push_anywhere.py.

The registry keeps its storage in the user's cache and listens on the same loopback port
from one run to the next, as a site's registry does: Docker remembers which layer digests it
pushed to that registry, and a layer already there is not compressed and sent again (each
arch's 5 GB payload took minutes of gzip on every run). A layer that changed is pushed in
full, and every manifest, the merged list and each pull by digest are checked as before.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import urllib.request
from pathlib import Path

import pytest

from torchpod.errors import RuntimeFailure
from torchpod_toolkit.imagebuild import registry
from torchpod_toolkit.imagebuild.definitions import load_definitions

import registry_helpers
from paths import ROOT

pytestmark = [pytest.mark.docker, pytest.mark.registry]
MANIFEST_LIST_V2 = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


# The ports tried, first free first: the same one run after run (Docker's record of what it
# pushed is per registry address), another when a concurrent session holds it.
PORTS = range(5055, 5065)
# Over this, the kept storage is emptied first: a lock that changed leaves its old layers there.
MAX_KEPT_BYTES = 16 << 30


def kept_port() -> int:
    for port in PORTS:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    return registry_helpers.free_port()


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


@pytest.fixture(scope="module")
def local_registry(require_tool):
    from torchpod_toolkit.imagebuild.host import user_cache

    binary = require_tool("docker-registry", "docker-registry")
    port = kept_port()
    root = user_cache() / "test-registry" / str(port)
    if root.exists() and _size(root) > MAX_KEPT_BYTES:
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    with registry_helpers.serving(binary, root, port) as address:
        yield address


def get_json(url: str, accept: str) -> dict:
    return get_json_and_digest(url, accept)[0]


def get_json_and_digest(url: str, accept: str) -> tuple[dict, str]:
    req = urllib.request.Request(url, headers={"Accept": accept})
    with urllib.request.urlopen(req, timeout=30) as resp:
        body = resp.read()
    return json.loads(body), "sha256:" + hashlib.sha256(body).hexdigest()


def test_push_merges_every_arch_and_each_pulls_back_by_digest(local_registry, docker_client, definitions):
    # the default image: the push and merge are the same code for every definition, and
    # each image pushed costs its size again on disk while the test runs
    from torchpod_toolkit.imagebuild.definitions import DEFAULT_IMAGE

    for defn in [definitions[DEFAULT_IMAGE]]:
        result = registry.push(defn, local_registry)
        assert [arch for arch, _, _ in result.images] == [a.name for a in defn.arches]
        index, digest = get_json_and_digest(
            f"http://{local_registry}/v2/{defn.repository}/manifests/{defn.version_tag}",
            f"{MANIFEST_LIST_V2}, {OCI_INDEX}")
        assert digest == result.manifest_digest  # what push reported is what the registry holds
        assert index["mediaType"] in (MANIFEST_LIST_V2, OCI_INDEX)
        by_arch = {m["platform"]["architecture"]: m["digest"] for m in index["manifests"]}
        assert sorted(by_arch) == sorted(a.docker.split("/")[1] for a in defn.arches)
        for arch, _, digest in result.images:
            assert by_arch[defn.arch(arch).docker.split("/")[1]] == digest
            ref = f"{local_registry}/{defn.repository}@{digest}"
            pulled = docker_client.images.pull(ref)
            assert pulled.attrs["Architecture"] == defn.arch(arch).docker.split("/")[1]
            assert pulled.labels["io.torchpod.arch"] == arch
            docker_client.images.remove(ref)


def test_an_image_never_built_fails_before_pushing(local_registry, tmp_path):
    shutil.copy(ROOT / "images" / "pytorch.yaml", tmp_path / "ghost.yaml")
    ghost = load_definitions(tmp_path)["ghost"]  # same content, never built under this name
    with pytest.raises(RuntimeFailure, match="no local image of ghost .*run `invoke build --image ghost"):
        registry.push(ghost, local_registry)
    catalog = get_json(f"http://{local_registry}/v2/_catalog", "application/json")
    assert ghost.repository not in catalog.get("repositories", [])
