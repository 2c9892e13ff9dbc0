"""Image definitions: the shipped ones load, and every kind of bad file names file and key."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from torchpod.arch import normalise_arch
from torchpod.errors import InputError
from torchpod_toolkit.imagebuild.definitions import load_definitions, select

from paths import ROOT

GOOD = """\
arches: [x86_64, arm64]
base: {debian: bookworm}
python: "3.11"
torch: {version: "2.13.0", torchvision: "0.28.0", index_url: https://pypi.org/simple}
expect: {cuda: "13.0", nccl: "2.29.7"}
rdma_core: {packages: [libibverbs1], providers: [mlx5]}
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    (tmp_path / f"{name}.yaml").write_text(text)
    return tmp_path


def test_shipped_definitions_load_and_default_builds_both_arches():
    defs = load_definitions(ROOT / "images")
    default = defs["pytorch"]
    assert [a.name for a in default.arches] == ["x86_64", "aarch64"]
    assert default.ci
    assert int(default.torch.version.split(".")[1]) >= 11  # PyPI's aarch64 CUDA builds start at 2.11
    # the older-driver variant inherits everything it does not override
    old = defs["pytorch-cu126"]
    assert old.expect.cuda.startswith("12.") and old.rdma_core == default.rdma_core and not old.ci


def test_tags_carry_the_arch_and_merge_without_it(tmp_path):
    defn = load_definitions(write(tmp_path, "img", GOOD))["img"]
    arm = normalise_arch("arm64")
    assert defn.ref(arm) == "torchpod/img:2.13.0-cuda13.0-aarch64"
    assert defn.manifest_ref("127.0.0.1:5000") == "127.0.0.1:5000/torchpod/img:2.13.0-cuda13.0"


@pytest.mark.parametrize(
    "text, needle",
    [
        (GOOD + "colour: blue\n", "unknown key 'colour'"),
        (GOOD.replace("providers: [mlx5]", "providers: [mlx5], flavour: x"), "unknown key 'rdma_core.flavour'"),
        (GOOD.replace("[x86_64, arm64]", "[x86_64, sparc]"), "arches[1]='sparc'"),
        (GOOD.replace('python: "3.11"', "python: 3.11"), "'python' must be a str"),
        (GOOD.replace("base: {debian: bookworm}", "base: {debian: bookworm, image: 'ubuntu:24.04'}"), "exactly one of"),
        (GOOD.replace('nccl: "2.29.7"', 'nccl: ""'), "missing required key 'expect.nccl'"),
        (GOOD + "aws_ofi_nccl: {version: '1.14.0', sha256: abc}\n", "expected 64 lower-case hex"),
        (GOOD + "aws_ofi_nccl: {version: '1.14.0', tarball: a.tgz}\n"
                "aws_ofi_nccl: {version: '1.15.0', tarball: b.tgz}\n",
         "key 'aws_ofi_nccl' appears twice"),
        (GOOD + "aws_ofi_nccl: {version: '1.14.0', tarball: x.tgz, libfabric: ucx}\n", "aws_ofi_nccl.libfabric='ucx'"),
        ("arches: [x86_64\n", "malformed YAML"),
        ("extends: nowhere\n", "'extends: nowhere' names no definition"),
        (GOOD.replace('torchvision: "0.28.0"', 'torchvision: "0.29.1"'),
         "torch.torchvision='0.29.1' does not match torch.version='2.13.0'; expected a torchvision 0.28.x release"),
        (GOOD.replace(', torchvision: "0.28.0"', ""), "missing required key 'torch.torchvision'"),
        (GOOD.replace('version: "2.13.0"', 'version: "1.13.1"'), "expected a torch 2.x release"),
        # free text in a version would reach pip as an option, and the image tag
        (GOOD.replace('"2.13.0"', '"2.13.0 --index-url=http://evil/simple"'),
         "torch.version='2.13.0 --index-url=http://evil/simple'; expected a PEP 440 version"),
        (GOOD.replace('"2.13.0"', '"2.13.0; rm -rf /"'), "torch.version='2.13.0; rm -rf /'; expected a PEP 440"),
        (GOOD.replace('"2.13.0"', '"2.13.0\\n"'), "torch.version='2.13.0\\n'"),  # Version() would strip it
        (GOOD.replace('"2.13.0"', '"v2.13.0"'), "expected a PEP 440 version in normal form: '2.13.0'"),
        (GOOD.replace('"0.28.0"', '"0.28.0\\n"'), "torch.torchvision='0.28.0\\n'"),
        (GOOD.replace('"2.13.0"', '"2.13.0+cu130"'), "makes the tag '2.13.0+cu130-cuda13.0-x86_64'"),
        (GOOD.replace('"13.0"', '"13.0 x"'), "expect.cuda='13.0 x'; expected MAJOR.MINOR"),
        (GOOD.replace('"2.29.7"', '"2.29.7\\n"'), "expect.nccl='2.29.7\\n'"),
        (GOOD.replace('"3.11"', '"3.11\\n"'), "python='3.11\\n'; expected MAJOR.MINOR"),
        (GOOD.replace('"3.11"', '"3.\u0661\u0661"'), "python="),  # Arabic-Indic digits are not ASCII
        # every wheel pinned exactly, each package once
        (GOOD.replace("simple}", "simple, extra_packages: [numpy]}"), "torch.extra_packages[0]='numpy'; expected a "
         "wheel pinned exactly as NAME==VERSION"),
        (GOOD.replace("simple}", "simple, extra_packages: ['numpy>=2']}"), "extra_packages[0]='numpy>=2'"),
        (GOOD.replace("simple}", "simple, extra_packages: ['numpy==2.4.6 ; os_name==\"nt\"']}"), "extra_packages[0]"),
        (GOOD.replace("simple}", "simple, sdist_packages: ['--index-url=http://evil==1']}"), "sdist_packages[0]"),
        (GOOD.replace("simple}", "simple, extra_packages: ['Torch==2.13.0']}"),
         "pins 'torch', which torch.version already pins"),
        # values that reach mmdebstrap, apt, pip or FROM as words
        (GOOD.replace("{debian: bookworm}", "{debian: bookworm, mirror: '--setup-hook=touch P'}"), "base.mirror="),
        (GOOD.replace("{debian: bookworm}", "{debian: 'bookworm --x'}"), "base.debian='bookworm --x'"),
        (GOOD.replace("{debian: bookworm}", "{image: 'ubuntu:24.04 AS x'}"), "base.image='ubuntu:24.04 AS x'"),
        (GOOD.replace("{debian: bookworm}", "{image: 'ubuntu@sha256:abc'}"), "base.image='ubuntu@sha256:abc'"),
        (GOOD.replace("index_url: https://pypi.org/simple", "index_url: 'https://x/s --trusted-host x'"),
         "torch.index_url="),
        (GOOD.replace("[libibverbs1]", "['libibverbs1 -o APT::Update::Pre-Invoke::=x']"), "rdma_core.packages[0]="),
        (GOOD + 'description: "a\\nRUN touch P"\n', "description='a\\nRUN touch P'; expected one line"),
        # the net plugin's source: pinned, one of url or tarball, inside the repository
        (GOOD + "aws_ofi_nccl: {version: '1.14.0', tarball: ../../../../etc/shadow}\n", "no '..'"),
        (GOOD + f"aws_ofi_nccl: {{version: '1.14.0', tarball: /etc/shadow, sha256: {'a' * 64}}}\n",
         "aws_ofi_nccl.tarball='/etc/shadow'; expected a relative path"),
        (GOOD + "aws_ofi_nccl: {version: '1.14.0', tarball: x.tgz}\n", "has no aws_ofi_nccl.sha256"),
        (GOOD + f"aws_ofi_nccl: {{version: '1.14.0', tarball: x.tgz, sha256: {'a' * 64}, url: 'https://h/x.tgz'}}\n",
         "aws_ofi_nccl has both 'tarball' and 'url'"),
        (GOOD + f"aws_ofi_nccl: {{version: '1.14.0', sha256: \"{'a' * 64}\\n\"}}\n", "expected 64 lower-case hex"),
        (GOOD + f"aws_ofi_nccl: {{version: '1.14.0', sha256: {'A' * 64}}}\n", "expected 64 lower-case hex"),
        (GOOD + "aws_ofi_nccl: {version: '1.14.0 x'}\n", "aws_ofi_nccl.version='1.14.0 x'"),
        (GOOD + "aws_ofi_nccl: {version: '1.14.0', url: 'file:///etc/shadow'}\n", "aws_ofi_nccl.url="),
        ("extends: '../x'\n", "extends='../x'; expected the stem of another file"),
    ],
)
def test_bad_definitions_name_file_and_key(tmp_path, text, needle):
    write(tmp_path, "bad", text)
    with pytest.raises(InputError) as info:
        load_definitions(tmp_path)
    message = str(info.value)
    assert needle in message
    assert "bad.yaml" in message
    assert message.isprintable()  # one line: no \n, \r, U+2028 or other break


def test_every_shipped_definition_pins_the_matching_torchvision():
    for defn in load_definitions(ROOT / "images").values():
        minor = int(defn.torch.version.split(".")[1])
        assert defn.torch.torchvision.startswith(f"0.{minor + 15}."), defn.name
        assert f"torchvision=={defn.torch.torchvision}" in defn.torch.requirements


def test_extends_cycle_is_reported(tmp_path):
    write(tmp_path, "a", "extends: b\n")
    write(tmp_path, "b", "extends: a\n")
    with pytest.raises(InputError, match="cycle"):
        load_definitions(tmp_path)


def test_unknown_image_and_undeclared_arch(tmp_path):
    defs = load_definitions(write(tmp_path, "img", GOOD.replace("[x86_64, arm64]", "[x86_64]")))
    with pytest.raises(InputError, match=r"--image='nope' is not defined; expected one of img"):
        select(defs, "nope")
    with pytest.raises(InputError, match=r"declares arches \[x86_64\]"):
        defs["img"].arch("aarch64")
    with pytest.raises(InputError, match=r"--arch='mips'"):
        defs["img"].arch("mips")


def test_shipped_files_stay_valid_when_copied(tmp_path):
    # the loader resolves `extends` within the folder it is given, not by a fixed path
    for f in (ROOT / "images").glob("*.yaml"):
        shutil.copy(f, tmp_path)
    assert set(load_definitions(tmp_path)) == {f.stem for f in (ROOT / "images").glob("*.yaml")}


def test_host_torch_is_the_default_images_torch():
    # setup.sh installs it from images/ (torchpod_toolkit.imagebuild.definitions --host-torch): the
    # contract tests then judge torchrun argv with the torch users' images carry
    from importlib.metadata import version

    from torchpod_toolkit.imagebuild.definitions import DEFAULT_IMAGE, host_torch_pin

    pin = host_torch_pin(ROOT / "images")
    assert pin == f"torch=={load_definitions(ROOT / 'images')[DEFAULT_IMAGE].torch.version}"
    assert f"torch=={version('torch').split('+')[0]}" == pin
