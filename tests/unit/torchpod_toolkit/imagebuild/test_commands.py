"""torchpod_toolkit.imagebuild.commands: the argv `invoke build` runs (BuildKit, wheel selection, base
tags, labels, mismatches), checked without an engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchpod.arch import ARCHES
from torchpod.errors import InputError, RuntimeFailure
from torchpod_toolkit.imagebuild import commands
from torchpod_toolkit.imagebuild.commands import Builder
from torchpod_toolkit.imagebuild.definitions import load_definitions

from paths import ROOT

DEFN = load_definitions(ROOT / "images")["pytorch"]
ARM, X86 = ARCHES["aarch64"], ARCHES["x86_64"]


def test_pip_platforms_cover_the_base_glibc_and_target_arch():
    tags = commands.pip_platforms(DEFN, ARM)
    assert tags[0] == "manylinux_2_36_aarch64"  # bookworm's glibc
    assert "manylinux_2_28_aarch64" in tags and "manylinux2014_aarch64" in tags
    assert not any("x86_64" in t for t in tags)


def test_build_command_targets_the_arch_and_takes_wheels_only_from_the_staged_lock():
    argv = commands.build_command(Builder("/usr/bin/docker", buildx=False), DEFN, ARM, context=ROOT,
                                  tag="t:1", base_image="b-arm", build_base_image="b-amd", source_date_epoch=1700000000)
    assert argv[:2] == ["/usr/bin/docker", "build"]
    assert argv[argv.index("--platform") + 1] == "linux/arm64"
    args = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--build-arg")
    assert args["BASE_IMAGE"] == "b-arm" and args["BUILD_BASE_IMAGE"] == "b-amd"
    assert "--platform manylinux_2_28_aarch64" in args["PIP_TARGET"]
    assert args["BASE_PACKAGES"].split() == commands.base_packages(DEFN)
    assert args["SOURCE_DATE_EPOCH"] == "1700000000"
    # no index, no requirement list, no CA: the payload stage installs the staged lock offline
    assert not {"REQUIREMENTS", "PIP_SOURCE", "SDISTS"} & set(args) and "--secret" not in argv
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    script = (ROOT / "docker" / "payload" / "payload.sh").read_text()
    assert "--no-index" in script and "--require-hashes" in script and '-r "$list"' in script
    assert 'shards.py" split "$wheels/locked.txt"' in script  # every pip reads a shard of the staged lock
    # both payload stages (cross: the build machine's arch; native: in the target's base) run it
    # on the staged lock, and nothing caches pip's downloads
    for stage in ("payload", "runtime-payload-native"):
        body = dockerfile.split(f" AS {stage}\n")[1].split("\nFROM ")[0]
        assert "source=.cache/wheels/payload" in body and "sh /srv/payload.sh" in body, stage
    assert "--mount=type=cache" not in dockerfile
    assert "--no-cache" in commands.build_command(Builder("docker", buildx=False), DEFN, ARM, context=ROOT, tag="t",
                                                  base_image="b", build_base_image="b", no_cache=True)


def test_the_lock_resolution_selects_what_the_payload_stage_installs(tmp_path):
    # one selection (platform tags, Python) for the lock's resolution and the payload stage
    build = commands.build_command(Builder("docker", buildx=False), DEFN, ARM, context=ROOT, tag="t",
                                   base_image="b", build_base_image="b")
    args = dict(build[i + 1].split("=", 1) for i, a in enumerate(build) if a == "--build-arg")
    resolve = commands.resolve_command(DEFN, ARM, "python", None, scratch=tmp_path / "t", report=tmp_path / "r.json",
                                       find_links=tmp_path / "built")
    text = " ".join(resolve)
    assert args["PIP_TARGET"] in text and " ".join(commands.pip_source(DEFN)) in text
    assert resolve[-len(commands.requirements(DEFN)):] == commands.requirements(DEFN)
    assert "--dry-run" in resolve and "--report" in resolve and "--find-links" in resolve
    sdists = commands.sdist_download_command(DEFN, tmp_path, "python", Path("/etc/ca.pem"))
    assert sdists[-1] == "python-etcd==0.4.5" and "--no-binary=:all:" in sdists and "/etc/ca.pem" in sdists


def test_rebuild_busts_layers_through_an_arg_declared_in_both_stages():
    kw = dict(context=ROOT, tag="t:1", base_image="b", build_base_image="b")
    plain = commands.build_command(Builder("docker", buildx=False), DEFN, ARM, **kw)
    forced = commands.build_command(Builder("docker", buildx=False), DEFN, ARM, rebuild="tok1", **kw)
    assert "TORCHPOD_REBUILD=tok1" in forced and not any("TORCHPOD_REBUILD" in a for a in plain)
    assert "--no-cache" not in forced
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    stages = dockerfile.split("\nFROM ")
    assert all('ARG TORCHPOD_REBUILD=""' in stage for stage in stages[1:]), "every stage must see the arg"


def test_buildx_when_present():
    b = Builder("docker", buildx=True)
    assert b.build_argv() == ["docker", "buildx", "build", "--load"] and b.env == {}
    assert Builder("docker", buildx=False).env == {"DOCKER_BUILDKIT": "1"}


def test_base_tag_changes_with_its_packages():
    assert commands.base_tag(DEFN, ARM).startswith("torchpod-base:bookworm-arm64-")
    assert commands.base_tag(DEFN, ARM) != commands.base_tag(DEFN, X86)
    rootfs = commands.rootfs_command(DEFN, ARM, Path("/tmp/r.tar"))
    assert "--arch=arm64" in rootfs and any("libibverbs1" in a and "python3-venv" in a for a in rootfs)


def test_mismatches_name_what_differs():
    good = {"machine": "aarch64", "python": "3.11.2", "torch": "2.13.0", "torchvision": "0.28.0+cu130",
            "cuda": "13.0", "nccl": "2.29.7"}
    assert commands.mismatches(DEFN, ARM, good) == []
    wrong = commands.mismatches(DEFN, ARM, {**good, "machine": "x86_64", "nccl": "2.27.3"})
    assert len(wrong) == 2 and "machine: expected 'aarch64'" in wrong[0] and "nccl" in wrong[1]


def test_labels_come_from_what_was_found():
    found = {"torch": "2.13.0+cu130", "cuda": "13.0", "nccl": "2.29.7", "rdma-core": "44.0"}
    values = commands.labels(DEFN, ARM, found, created="2026-01-01T00:00:00Z", revision="abc")
    assert values["io.torchpod.torch"] == "2.13.0+cu130"  # read back, not the YAML's "2.13.0"
    assert values["io.torchpod.arch"] == "aarch64"
    assert "io.torchpod.aws-ofi-nccl" not in values  # not built, so not claimed
    dockerfile = commands.label_dockerfile("src:1", {"k": 'say "hi"'})
    assert dockerfile == 'FROM src:1\nLABEL "k"="say \\"hi\\""\n'


def test_a_variant_builds_the_plugin_stage_from_the_staged_tarball():
    from dataclasses import replace

    from torchpod.errors import InputError
    from torchpod_toolkit.imagebuild import definitions

    kw = dict(context=ROOT, tag="t:1", base_image="b", build_base_image="b", payload_image="p")
    base = commands.build_command(Builder("docker", buildx=False), DEFN, ARM, **kw)
    assert base[base.index("--target") + 1] == "runtime" and not any("NETPLUGIN" in a for a in base)
    efa = load_definitions(ROOT / "images")["pytorch-efa"]
    # a variant's payload is the default image's: no plugin, no tarball needed for it
    payload = commands.build_command(Builder("docker", buildx=False), efa, ARM,
                                     **{**{k: v for k, v in kw.items() if k != "payload_image"}, "base_image": "a"})
    assert payload[payload.index("--target") + 1] == "runtime-payload" and not any("NETPLUGIN" in a for a in payload)
    with pytest.raises(InputError, match="needs the verified source tarball"):
        commands.build_command(Builder("docker", buildx=False), efa, ARM, **kw)
    with pytest.raises(InputError, match="needs the apt layer's packages"):
        commands.build_command(Builder("docker", buildx=False), efa, ARM,
                               netplugin_tarball=".cache/sources/netplugin/x.tar.gz", **kw)
    kw["netplugin_debs"] = ["libfabric1=1.17.0-3", "libfabric-bin=1.17.0-3"]
    argv = commands.build_command(Builder("docker", buildx=False), efa, ARM,
                                  netplugin_tarball=".cache/sources/netplugin/x.tar.gz", **kw)
    assert "NETPLUGIN_DEBS=libfabric1=1.17.0-3 libfabric-bin=1.17.0-3" in argv
    with pytest.raises(InputError, match="build arg NETPLUGIN_DEBS: word 'libfabric1=1.17.0-3;id'"):
        commands.build_command(Builder("docker", buildx=False), efa, ARM, **{
            **kw, "netplugin_debs": ["libfabric1=1.17.0-3;id"], "netplugin_tarball": "x.tar.gz"})
    assert argv[argv.index("--target") + 1] == "netplugin-image"
    assert "NETPLUGIN_TARBALL=.cache/sources/netplugin/x.tar.gz" in argv and "NETPLUGIN_CUDA=nvidia/cu13" in argv
    assert "NETPLUGIN_CONFIGURE=--enable-platform-aws" in argv  # efa asks for it; cxi does not
    cxi = load_definitions(ROOT / "images")["pytorch-slingshot"]
    assert "NETPLUGIN_CONFIGURE=" in commands.build_command(Builder("docker", buildx=False), cxi, ARM,
                                                            netplugin_tarball="x.tar.gz", **kw)
    old = replace(efa, expect=replace(efa.expect, cuda="11.8"))
    with pytest.raises(InputError, match="no nvidia wheel for CUDA 11.8 is known"):
        commands.build_command(Builder("docker", buildx=False), old, ARM,
                               netplugin_tarball=".cache/sources/netplugin/x.tar.gz", **kw)
    override = definitions.with_netplugin_source(efa, ROOT / "x.tar.gz", "1.0.0")
    assert override.aws_ofi_nccl.url is None and override.aws_ofi_nccl.version == "1.0.0"
    with pytest.raises(InputError, match="has no 'aws_ofi_nccl' section"):
        definitions.with_netplugin_source(DEFN, ROOT / "x.tar.gz", "1.0.0")
    # the version names the staged file (a COPY source) and the label: one grammar, from the CLI too
    with pytest.raises(InputError, match=r"^--netplugin-version='1.0.0 x'; expected a release version"):
        definitions.with_netplugin_source(efa, ROOT / "x.tar.gz", "1.0.0 x")
    with pytest.raises(InputError, match=r"^--netplugin-sha256='a+\\n'; expected 64 lower-case hex"):
        definitions.with_netplugin_source(efa, ROOT / "x.tar.gz", "1.0.0", "a" * 64 + "\n")


def test_a_variant_whose_plugin_differs_from_its_definition_is_refused():
    efa = load_definitions(ROOT / "images")["pytorch-efa"]
    found = {"machine": "aarch64", "python": "3.11.2", "torch": "2.13.0+cu130", "torchvision": "0.28.0+cu130",
             "cuda": "13.0", "nccl": "2.29.7", "nccl-net-plugin-version": "1.14.0",
             "nccl-net-plugin-machine": "aarch64", "nccl-net-plugin-api": "v11", "libfabric": "1.17 (FABRIC_1.6)"}
    assert commands.mismatches(efa, ARM, found) == []
    wrong = commands.mismatches(efa, ARM, {**found, "nccl-net-plugin-version": "1.0.0",
                                           "nccl-net-plugin-machine": "x86_64", "nccl-net-plugin-api": ""})
    assert len(wrong) == 3 and "expected version '1.14.0'" in wrong[0] and "built for 'x86_64'" in wrong[1]


def _args(argv: list[str]) -> dict[str, str]:
    return dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--build-arg")


def test_build_args_split_back_into_exactly_the_checked_words():
    # The Dockerfile expands these unquoted so that each word is one pip/apt argument; the
    # payload RUN has globbing off, so the split is the whole transformation.
    kw = dict(context=ROOT, tag="t:1", base_image="b", build_base_image="b")
    args = _args(commands.build_command(Builder("docker", buildx=False), DEFN, ARM, **kw))
    assert args["PIP_TARGET"].split(" ") == commands.pip_target(DEFN, ARM)
    assert args["BASE_PACKAGES"].split(" ") == commands.base_packages(DEFN)
    script = (ROOT / "docker" / "payload" / "payload.sh").read_text()
    assert "set -euf\n" in script and "${PIP_TARGET}" in script


@pytest.mark.parametrize("field, value, needle", [
    ("python", "3.11 --index-url=http://evil/simple", "build arg PYTHON_VERSION: word"),
])
def test_a_definition_built_around_the_loader_still_cannot_reach_a_build_arg(field, value, needle):
    from dataclasses import replace

    # dataclasses.replace skips every check of the loader; build_command checks each word again
    hostile = replace(DEFN, **{field: value})
    kw = dict(context=ROOT, tag="t:1", base_image="b", build_base_image="b")
    with pytest.raises(InputError) as info:
        commands.build_command(Builder("docker", buildx=False), hostile, ARM, **kw)
    assert needle in str(info.value) and str(info.value).isprintable()
    packages = replace(DEFN, rdma_core=replace(DEFN.rdma_core, packages=("libibverbs1", "lib*")))
    with pytest.raises(InputError, match=r"build arg BASE_PACKAGES: word 'lib\*'"):
        commands.build_command(Builder("docker", buildx=False), packages, ARM, **kw)


def test_the_base_is_bootstrapped_at_its_locked_versions_and_its_tag_follows_them(tmp_path):
    plain = commands.rootfs_command(DEFN, ARM, tmp_path / "r.tar")
    pinned = commands.rootfs_command(DEFN, ARM, tmp_path / "r.tar", {"python3": "3.11.2-1+b1", "libc6": "2.36-9"})
    include = pinned[3].removeprefix("--include=").split(",")
    assert "python3=3.11.2-1+b1" in include and "libc6=2.36-9" in include and "ca-certificates" in include
    assert plain[3] == "--include=" + ",".join(commands.base_packages(DEFN))
    tags = {commands.base_tag(DEFN, ARM), commands.base_tag(DEFN, ARM, {"libc6": "2.36-9"}),
            commands.base_tag(DEFN, ARM, {"libc6": "2.36-10"})}
    assert len(tags) == 3
    with pytest.raises(InputError, match="Debian package 'libc6=2.36;rm'"):
        commands.rootfs_command(DEFN, ARM, tmp_path / "r.tar", {"libc6": "2.36;rm"})


def test_a_label_value_is_one_escaped_line_or_refused():
    dockerfile = commands.label_dockerfile("src:1", {"k": "a $HOME \\ \"q\""})
    assert dockerfile == 'FROM src:1\nLABEL "k"="a \\$HOME \\\\ \\"q\\""\n'
    for value in ("a\nRUN touch P", "a\r", "a\u2028b", "a\x85"):
        with pytest.raises(RuntimeFailure, match="not one printable line"):
            commands.label_dockerfile("src:1", {"k": value})
    with pytest.raises(InputError, match="build arg label source"):
        commands.label_dockerfile("src:1\nRUN touch P", {})


def test_the_payload_image_is_built_alone_and_the_image_stands_on_it():
    kw = dict(context=ROOT, tag="t:1", base_image="b-arm", build_base_image="b-amd")
    payload = commands.build_command(Builder("docker", buildx=False), DEFN, ARM, **kw)
    image = commands.build_command(Builder("docker", buildx=False), DEFN, ARM, payload_image="torchpod-payload:a1",
                                   **kw)
    args = {name: dict(a[i + 1].split("=", 1) for i, w in enumerate(a) if w == "--build-arg")
            for name, a in (("payload", payload), ("image", image))}
    assert payload[payload.index("--target") + 1] == "runtime-payload"
    assert image[image.index("--target") + 1] == "runtime"
    # on the build machine's own arch (one base for both stages) the payload installs in place
    native = commands.build_command(Builder("docker", buildx=False), DEFN, X86, context=ROOT, tag="t",
                                    base_image="b-amd", build_base_image="b-amd")
    assert native[native.index("--target") + 1] == "runtime-payload-native"
    assert args["image"]["PAYLOAD_IMAGE"] == "torchpod-payload:a1"
    assert args["payload"]["PAYLOAD_IMAGE"] == "b-arm"  # a placeholder: no stage of that target reads it
    with pytest.raises(InputError, match="build arg PAYLOAD_IMAGE: word 'p q'"):
        commands.build_command(Builder("docker", buildx=False), DEFN, ARM, payload_image="p q", **kw)
    # the Dockerfile: the payload stage feeds the payload image only; every later stage stands on
    # the image (a stage name or FROM), so a build of the image never runs pip
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    head, tail = dockerfile.split("FROM ${PAYLOAD_IMAGE} AS runtime-base")
    assert "FROM ${BASE_IMAGE} AS runtime-payload" in head and "COPY --from=payload /out/ /" in head
    assert "--from=payload " not in tail and "--from=payload/" not in tail and "pip install" not in tail
