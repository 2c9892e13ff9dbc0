"""torchpod_toolkit.imagebuild.registry: where `invoke push` sends an image (a registry, or any
repository path under one), which arches it pushes, and the commands it runs to merge
per-arch tags into one multi-arch name (buildx imagetools or docker manifest), checked
without an engine; anything else is refused in one line."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchpod.arch import ARCHES
from torchpod.errors import InputError, RuntimeFailure
from torchpod_toolkit.grammars import is_reference
from torchpod_toolkit.imagebuild import registry
from torchpod_toolkit.imagebuild.commands import Builder
from torchpod_toolkit.imagebuild.definitions import load_definitions

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


def test_every_built_arch_is_pushed_and_a_declared_one_not_built_is_named():
    assert registry.choose_arches(DEFN, [X86, ARM]) == ([X86, ARM], [])
    assert registry.choose_arches(DEFN, [ARM]) == ([ARM], ["x86_64"])
    assert registry.choose_arches(DEFN, [X86, ARM], "aarch64") == ([ARM], [])  # asked: nothing left out


def test_an_arch_not_built_or_none_at_all_is_refused_naming_the_build():
    with pytest.raises(RuntimeFailure, match="no local image torchpod/pytorch:.*-aarch64; run `invoke build "
                                             "--image pytorch --arch aarch64`"):
        registry.choose_arches(DEFN, [X86], "aarch64")
    with pytest.raises(RuntimeFailure, match="no local image of pytorch"):
        registry.choose_arches(DEFN, [])
    with pytest.raises(InputError, match="--arch='ppc64le'"):
        registry.choose_arches(DEFN, [X86], "ppc64le")


@pytest.mark.parametrize("value, repository, tag", [
    ("127.0.0.1:5000", "127.0.0.1:5000/torchpod/pytorch", DEFN.version_tag),
    ("ghcr.io", "ghcr.io/torchpod/pytorch", DEFN.version_tag),
    ("ghcr.io/myorg/ml/pytorch", "ghcr.io/myorg/ml/pytorch", DEFN.version_tag),
    ("harbor.example.com:8443/proj/sub/team/pytorch:2.13-exp", "harbor.example.com:8443/proj/sub/team/pytorch",
     "2.13-exp"),
    ("1234.dkr.ecr.us-east-1.amazonaws.com/ml/pytorch", "1234.dkr.ecr.us-east-1.amazonaws.com/ml/pytorch",
     DEFN.version_tag),
    ("localhost/a/b", "localhost/a/b", DEFN.version_tag),
    ("[::1]:5000/x", "[::1]:5000/x", DEFN.version_tag),
])
def test_a_registry_or_any_repository_under_one(value, repository, tag):
    where = registry.target(value, DEFN)
    assert (where.repository, where.tag) == (repository, tag)
    assert where.ref(X86) == f"{repository}:{tag}-x86_64" and where.ref() == f"{repository}:{tag}"


@pytest.mark.parametrize("value, says", [
    ("", "--registry is required"),
    ("myorg/pytorch", "names no registry"),
    ("library/pytorch:1", "names no registry"),
    ("ghcr.io/MyOrg/pytorch", "is not a repository"),
    ("ghcr.io/o/p@sha256:" + "a" * 64, "is not a repository"),
    ("ghcr.io/o/p:", "is not a repository"),
    ("ghcr.io//p", "is not a repository"),
    ("ghcr.io/o/p\n", "is not a repository"),
    ("https://ghcr.io/o/p", "is not a repository"),
    ("ghcr.io/o/p:-bad", "is not a repository"),
    ("ghcr.io/" + "a/" * 200 + "p", "is not a repository"),
    ("ghcr.io/o/p:" + "t" * 125, "leaves no room for the per-arch suffix"),
    ("ghcr.io/o/p;rm -rf /", "is not a repository"),
])
def test_anything_else_is_one_line_naming_the_form(value, says):
    with pytest.raises(InputError) as err:
        registry.target(value, DEFN)
    message = str(err.value)
    assert says in message and "\n" not in message and "; expected " in message and len(message) < 400


@given(st.text(max_size=300))
def test_any_value_is_a_target_of_the_grammar_or_one_line(value):
    try:
        where = registry.target(value, DEFN)
    except InputError as err:
        assert "\n" not in str(err)
    else:
        assert is_reference(where.ref(X86)) and is_reference(where.ref())


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
