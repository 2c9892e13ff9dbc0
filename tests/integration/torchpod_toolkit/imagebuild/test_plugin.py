"""torchpod_toolkit.imagebuild.plugin reads what a real net plugin is from the file alone: torchpod's test
plugin, built from its release tarball with configure/make by the host's C compiler."""

from __future__ import annotations

import platform

import pytest

from torchpod_toolkit.imagebuild import plugin

from netplugin_build import NAME, VERSION, build_plugin, compiler, fake_libfabric, release_tarball


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    cc = compiler()
    root = tmp_path_factory.mktemp("plugin")
    lib = fake_libfabric(root / "fabric", "FABRIC_1.6", 17, cc)
    return build_plugin(release_tarball(root), lib.parent.parent, root / "prefix", root / "build", cc)


def test_the_built_plugin_says_its_arch_api_versions_name_and_package(built):
    info = plugin.read(built.read_bytes())
    assert info.machine == platform.machine()
    assert info.exported == (12, 11, 10, 9, 8) and info.name == "Libfabric"
    assert (info.package, info.version) == (NAME, VERSION)
    assert info.label == f"Libfabric ({NAME} {VERSION})"

