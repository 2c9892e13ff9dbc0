"""torchpod_toolkit.commands: the argv `invoke build` runs (BuildKit, wheel selection, base
tags, labels, mismatches), checked without an engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchpod.arch import ARCHES
from torchpod.errors import InputError, RuntimeFailure
from torchpod_toolkit import commands
from torchpod_toolkit.commands import Builder
from torchpod_toolkit.definitions import load_definitions

from paths import ROOT

DEFN = load_definitions(ROOT / "images")["pytorch"]
ARM, X86 = ARCHES["aarch64"], ARCHES["x86_64"]


def test_pip_platforms_cover_the_base_glibc_and_target_arch():
    tags = commands.pip_platforms(DEFN, ARM)
    assert tags[0] == "manylinux_2_36_aarch64"  # bookworm's glibc
    assert "manylinux_2_28_aarch64" in tags and "manylinux2014_aarch64" in tags
    assert not any("x86_64" in t for t in tags)


def test_build_command_targets_the_arch_and_passes_the_ca_as_a_secret():
    argv = commands.build_command(Builder("/usr/bin/docker", buildx=False), DEFN, ARM, context=ROOT,
                                  tag="t:1", base_image="b-arm", build_base_image="b-amd",
                                  wheelhouse=None, ca_bundle=Path("/etc/ca.pem"))
    assert argv[:2] == ["/usr/bin/docker", "build"]
    assert argv[argv.index("--platform") + 1] == "linux/arm64"
    args = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--build-arg")
    assert args["BASE_IMAGE"] == "b-arm" and args["BUILD_BASE_IMAGE"] == "b-amd"
    assert args["REQUIREMENTS"].split()[0] == f"torch=={DEFN.torch.version}"
    assert "--platform manylinux_2_28_aarch64" in args["PIP_TARGET"]
    assert args["PIP_SOURCE"] == "--index-url https://pypi.org/simple"
    assert args["SDISTS"] == "python-etcd==0.4.5"
    assert args["BASE_PACKAGES"].split() == commands.base_packages(DEFN)
    assert argv[argv.index("--secret") + 1] == "id=ca,src=/etc/ca.pem"
    # the bundle's content never reaches a build arg (build args are stored in the image history)
    assert not any("ca.pem" in v for v in args.values())


def test_image_and_wheelhouse_select_the_same_wheels(tmp_path):
    # one selection (platform tags, Python, index) for the Dockerfile's payload stage and
    # for `invoke wheels`: an offline build installs exactly what was downloaded
    build = commands.build_command(Builder("docker", buildx=False), DEFN, ARM, context=ROOT, tag="t",
                                   base_image="b", build_base_image="b", wheelhouse=None, ca_bundle=None)
    args = dict(build[i + 1].split("=", 1) for i, a in enumerate(build) if a == "--build-arg")
    download = " ".join(commands.download_command(DEFN, ARM, tmp_path, "python", None))
    assert f"{args['PIP_TARGET']} {args['PIP_SOURCE']}" in download
    assert download.endswith(args["REQUIREMENTS"])
    offline = commands.build_command(Builder("docker", buildx=False), DEFN, ARM, context=ROOT, tag="t",
                                     base_image="b", build_base_image="b", wheelhouse="pytorch-aarch64",
                                     ca_bundle=None)
    args = dict(offline[i + 1].split("=", 1) for i, a in enumerate(offline) if a == "--build-arg")
    assert args["PIP_SOURCE"] == f"--no-index --find-links {commands.WHEELHOUSE_MOUNT}/pytorch-aarch64"
    assert args["SDISTS"] == ""  # offline, the wheelhouse already holds them as wheels
    assert f"target={commands.WHEELHOUSE_MOUNT}" in (ROOT / "docker" / "Dockerfile").read_text()


def test_rebuild_busts_layers_through_an_arg_declared_in_both_stages():
    kw = dict(context=ROOT, tag="t:1", base_image="b", build_base_image="b", wheelhouse=None, ca_bundle=None)
    plain = commands.build_command(Builder("docker", buildx=False), DEFN, ARM, **kw)
    forced = commands.build_command(Builder("docker", buildx=False), DEFN, ARM, rebuild="tok1", **kw)
    assert "TORCHPOD_REBUILD=tok1" in forced and not any("TORCHPOD_REBUILD" in a for a in plain)
    assert "--no-cache" not in forced  # that would also empty pip's cache mount
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
    from torchpod_toolkit import definitions

    kw = dict(context=ROOT, tag="t:1", base_image="b", build_base_image="b", wheelhouse=None, ca_bundle=None)
    base = commands.build_command(Builder("docker", buildx=False), DEFN, ARM, **kw)
    assert base[base.index("--target") + 1] == "runtime" and not any("NETPLUGIN" in a for a in base)
    efa = load_definitions(ROOT / "images")["pytorch-efa"]
    with pytest.raises(InputError, match="needs the verified source tarball"):
        commands.build_command(Builder("docker", buildx=False), efa, ARM, **kw)
    argv = commands.build_command(Builder("docker", buildx=False), efa, ARM,
                                  netplugin_tarball=".cache/sources/netplugin/x.tar.gz", **kw)
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
    kw = dict(context=ROOT, tag="t:1", base_image="b", build_base_image="b", wheelhouse=None, ca_bundle=None)
    args = _args(commands.build_command(Builder("docker", buildx=False), DEFN, ARM, **kw))
    assert args["REQUIREMENTS"].split(" ") == commands.requirements(DEFN)
    assert args["BASE_PACKAGES"].split(" ") == commands.base_packages(DEFN)
    assert args["PIP_SOURCE"].split(" ") == commands.pip_source(DEFN)
    payload = (ROOT / "docker" / "Dockerfile").read_text().split("\nFROM ")[1]
    assert "set -euf;" in payload and "${REQUIREMENTS}" in payload


@pytest.mark.parametrize("field, value, needle", [
    ("extra_packages", ("numpy==2.4.6 --index-url=http://evil/simple",), "build arg REQUIREMENTS: word"),
    ("extra_packages", ("--pre",), "not starting with '-'"),
    ("sdist_packages", ("a==1\n",), "build arg REQUIREMENTS: word 'a==1\\n'"),
    ("index_url", "https://x/s --trusted-host x", "build arg PIP_SOURCE: word"),
])
def test_a_definition_built_around_the_loader_still_cannot_reach_a_build_arg(field, value, needle):
    from dataclasses import replace

    # dataclasses.replace skips every check of the loader; build_command checks each word again
    hostile = replace(DEFN, torch=replace(DEFN.torch, **{field: value}))
    kw = dict(context=ROOT, tag="t:1", base_image="b", build_base_image="b", wheelhouse=None, ca_bundle=None)
    with pytest.raises(InputError) as info:
        commands.build_command(Builder("docker", buildx=False), hostile, ARM, **kw)
    assert needle in str(info.value) and str(info.value).isprintable()
    packages = replace(DEFN, rdma_core=replace(DEFN.rdma_core, packages=("libibverbs1", "lib*")))
    with pytest.raises(InputError, match=r"build arg BASE_PACKAGES: word 'lib\*'"):
        commands.build_command(Builder("docker", buildx=False), packages, ARM, **kw)


def test_a_label_value_is_one_escaped_line_or_refused():
    dockerfile = commands.label_dockerfile("src:1", {"k": "a $HOME \\ \"q\""})
    assert dockerfile == 'FROM src:1\nLABEL "k"="a \\$HOME \\\\ \\"q\\""\n'
    for value in ("a\nRUN touch P", "a\r", "a\u2028b", "a\x85"):
        with pytest.raises(RuntimeFailure, match="not one printable line"):
            commands.label_dockerfile("src:1", {"k": value})
    with pytest.raises(InputError, match="build arg label source"):
        commands.label_dockerfile("src:1\nRUN touch P", {})
