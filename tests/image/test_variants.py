"""Image variants that carry an NCCL net plugin (images/* with aws_ofi_nccl), per arch.

In CI the plugin is torchpod's stand-in (tests/netplugin/, `invoke build
--netplugin-tarball test`), built through the same stage and definition key as
aws-ofi-nccl: cross-compiled for aarch64 on the x86_64 build host. Checked: the file's
ELF arch, that it loads inside the image with RTLD_NOW (no missing symbol), that it
exports an API version the image's NCCL tries, the labels against the built library,
`fi_info -l`, nothing of the build left behind, exactly one layer in place of the base image's
last (its SBOM), and
that the plan names the image's own plugin when nothing is injected.
"""

from __future__ import annotations

import io
import json
import tarfile

from torchpod import netplugin
from torchpod.fabric.site import IMAGE_PLUGIN
from torchpod_toolkit.imagebuild import plugin
from torchpod_toolkit.imagebuild.definitions import load_definitions

from paths import ROOT

DEFS = load_definitions(ROOT / "images")


def _file(variant, path: str) -> bytes:
    stream, _ = variant.container.get_archive(path)
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
        member = tar.getmembers()[0]
        return tar.extractfile(member).read()


def test_plugin_is_built_for_the_images_arch_and_matches_its_labels(variant):
    info = plugin.read(_file(variant, IMAGE_PLUGIN))
    assert info.machine == variant.arch.name
    label = variant.labels["io.torchpod.nccl-net-plugin"]
    assert label.startswith(info.label) and f"{info.package} {info.version}" in label, (label, info)
    nccl = tuple(int(x) for x in variant.labels["io.torchpod.nccl"].split("."))
    assert f"ncclNetPlugin_v{max(set(info.exported) & set(netplugin.wanted(nccl)))}" in label
    assert variant.labels["io.torchpod.libfabric"].split(" ")[0].count(".") == 1  # "1.17 (FABRIC_1.x)"


def test_plugin_loads_in_the_image_with_no_missing_symbol(variant):
    got = json.loads(variant.run(f"python -m torchpod.netplugin {IMAGE_PLUGIN}").splitlines()[-1])
    assert got["loaded"] == IMAGE_PLUGIN and got["tried"] == [], got
    assert got["chosen"] in got["wanted"] and "/libfabric.so.1" in got["libfabric"]["path"], got


def test_fi_info_lists_libfabrics_providers(variant):
    out = variant.run("fi_info -l")
    assert "tcp" in out or "sockets" in out, out


def test_no_compiler_headers_or_sources_left_behind(variant):
    for tool in ("gcc", "cc", "make", "aarch64-linux-gnu-gcc"):
        assert not variant.host.exists(tool), tool
    assert not variant.host.file("/opt/cuda").exists
    leftovers = variant.run("find / -xdev \\( -name '*.tar.gz' -o -name 'cuda_runtime_api.h' -o -name config.log "
                            "\\) -not -path '/opt/venv/*' -not -path '/proc/*' 2>/dev/null || true").split()
    assert leftovers == [], leftovers


def test_only_the_plugin_layer_differs_from_the_base_image(variant, docker_client):
    base_defn = DEFS[variant.defn.path.stem.split("-")[0]]  # pytorch-efa extends pytorch
    base = docker_client.images.get(base_defn.ref(variant.arch)).attrs["RootFS"]["Layers"]
    layers = variant.image.attrs["RootFS"]["Layers"]
    # the plain image ends with its SBOM's layer; the variant's one layer holds its own SBOM instead
    assert layers[:-1] == base[:-1] and len(layers) == len(base)


def test_plan_names_the_images_own_plugin_when_nothing_is_injected(variant):
    variant.run("mkdir -p /tmp/sys/class/infiniband/rdmap16s27/ports/1 && "
                "echo ACTIVE > /tmp/sys/class/infiniband/rdmap16s27/ports/1/state && "
                "echo Unknown > /tmp/sys/class/infiniband/rdmap16s27/ports/1/link_layer")
    out = variant.run("TORCHPOD_SYSFS_ROOT=/tmp/sys CUDA_VISIBLE_DEVICES= torchpod plan --format json -- train.py")
    env = json.loads(out)["env"]
    assert env["NCCL_NET_PLUGIN"] == IMAGE_PLUGIN and env["NCCL_NET"] == "AWS Libfabric", env
