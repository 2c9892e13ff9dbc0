"""torchpod.netplugin loads a real shared object as NCCL would (in a child process): the
test plugin built from its release tarball with configure/make, against stand-in
libfabrics of two ABIs. A plugin linked against a newer libfabric ABI than the one it
finds fails with the loader's own line, which the doctor quotes."""

from __future__ import annotations

import os

import pytest

from torchpod import netplugin

from netplugin_build import build_set, compiler


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    cc = compiler()
    return build_set(tmp_path_factory.mktemp("netplugin"), cc)


def probe(paths, names=("libnccl-net.so",), nccl=None):
    env = {**os.environ, "LD_LIBRARY_PATH": ":".join(str(p) for p in paths)}
    return netplugin.run_probe(env, list(names))


def test_the_plugin_loads_with_the_site_libfabric_and_says_what_it_is(built):
    got = probe([built["good"].parent, built["site_lib"]])
    assert got["loaded"] == "libnccl-net.so" and got["path"] == str(built["good"])
    assert got["exported"] == [12, 11, 10, 9, 8] and got["plugin_name"] == "Libfabric"
    assert got["chosen"] == max(set(got["exported"]) & set(got["wanted"]))
    assert got["libfabric"] == {"path": str(built["site_lib"] / "libfabric.so.1"), "abi": "FABRIC_1.6",
                                "version": "1.17"}


def test_a_plugin_built_for_a_newer_libfabric_abi_fails_with_the_loaders_line(built):
    got = probe([built["broken"].parent, built["site_lib"]])
    assert got["loaded"] is None
    (tried,) = got["tried"]
    assert "version `FABRIC_1.7' not found" in tried["error"] and "libnccl-net.so" in tried["error"]


def test_an_older_abi_plugin_loads_with_a_newer_libfabric(built):
    got = probe([built["good"].parent, built["new_lib"]])  # libfabric keeps old symbol versions
    assert got["loaded"] and got["libfabric"]["abi"] == "FABRIC_1.7" and got["libfabric"]["version"] == "1.20"


def test_nccl_net_plugin_names_are_tried_as_nccl_does(built):
    env = {"NCCL_NET_PLUGIN": "ofi"}
    got = probe([built["good"].parent, built["site_lib"]], [n for n, _ in netplugin.candidates(env)])
    assert [t["name"] for t in got["tried"]] == ["ofi"] and got["loaded"] == "libnccl-net-ofi.so"


def test_elf_version_definitions_are_read_from_the_file(built):
    assert netplugin.elf_version_defs(str(built["new_lib"] / "libfabric.so.1")) == ["FABRIC_1.0", "FABRIC_1.6",
                                                                                    "FABRIC_1.7"]
