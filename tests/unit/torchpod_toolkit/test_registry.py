"""torchpod_toolkit.registry: the commands `invoke push` runs to merge per-arch tags into one
multi-arch name (buildx imagetools or docker manifest), checked without an engine; a missing
arch or a registry that is not HOST:PORT is refused."""

from __future__ import annotations

import pytest

from torchpod.arch import ARCHES
from torchpod.errors import InputError, RuntimeFailure
from torchpod_toolkit import registry
from torchpod_toolkit.commands import Builder
from torchpod_toolkit.definitions import load_definitions

from paths import ROOT

DEFN = load_definitions(ROOT / "images")["pytorch"]
ARM, X86 = ARCHES["aarch64"], ARCHES["x86_64"]


def test_merge_uses_buildx_imagetools_when_present():
    argv = registry.merge_commands(Builder("docker", buildx=True), "r:5000/torchpod/pytorch:2.13.0-cuda13.0",
                                   ["r:5000/torchpod/pytorch@sha256:aa", "r:5000/torchpod/pytorch@sha256:bb"],
                                   insecure=False)
    assert argv == [["docker", "buildx", "imagetools", "create", "-t", "r:5000/torchpod/pytorch:2.13.0-cuda13.0",
                     "r:5000/torchpod/pytorch@sha256:aa", "r:5000/torchpod/pytorch@sha256:bb"]]
    assert registry.digest_command(Builder("docker", buildx=True), "x:1", insecure=False)[:4] == [
        "docker", "buildx", "imagetools", "inspect"]


def test_merge_without_buildx_uses_docker_manifest_insecure_only_for_plain_http():
    create, push = registry.merge_commands(Builder("/usr/bin/docker", buildx=False), "127.0.0.1:5000/t:1",
                                           ["127.0.0.1:5000/t@sha256:aa"], insecure=True)
    assert create == ["/usr/bin/docker", "manifest", "create", "--insecure", "--amend", "127.0.0.1:5000/t:1",
                      "127.0.0.1:5000/t@sha256:aa"]
    assert push == ["/usr/bin/docker", "manifest", "push", "--insecure", "--purge", "127.0.0.1:5000/t:1"]
    create, push = registry.merge_commands(Builder("docker", buildx=False), "ghcr.io/o/t:1", ["ghcr.io/o/t@sha256:aa"],
                                           insecure=False)
    assert "--insecure" not in create + push
    assert registry.digest_command(Builder("docker", buildx=False), "x:1", insecure=False) is None


def test_merge_refuses_a_missing_arch():
    with pytest.raises(RuntimeFailure, match="no local image exists for aarch64"):
        registry.check_complete(DEFN, [X86], "127.0.0.1:5000")
    registry.check_complete(DEFN, [X86, ARM], "127.0.0.1:5000")


@pytest.mark.parametrize("value", ["", "http://x:5000", "a/b", "127.0.0.1:5000\n", "a..b:5000", "-a:5000",
                                   "a:", "a:5000:1", "[::1", "reg.example:5000 ", "r\u00e9g:5000", None])
def test_registry_must_be_host_port(value):
    with pytest.raises(InputError, match="expected HOST:PORT"):
        registry.check_registry(value)


@pytest.mark.parametrize("value", ["127.0.0.1:5000", "localhost", "reg.example", "[::1]:5000", "a-b.c-d:1"])
def test_a_registry_domain_as_an_image_reference_names_it_is_taken(value):
    assert registry.check_registry(value) == value


def test_plain_http_for_loopback_or_when_asked():
    assert registry.plain_http("[::1]:5000", False)
    assert registry.plain_http("127.0.0.1:5000", False)
    assert registry.plain_http("localhost:5000", False)
    assert not registry.plain_http("reg.example:443", False)
    assert registry.plain_http("reg.example:5000", True)
