"""A site's NCCL net plugin and libfabric bind-mounted into a container of the default
image where the docs say (/opt/torchpod/site/lib), on a node that looks like Slingshot (a
cxi NIC and hsn0 in a sysfs tree given through TORCHPOD_SYSFS_ROOT; no such NIC exists
here). The plugin is torchpod's test plugin built by the tests from its release tarball,
the libfabrics stand-ins (tests/netplugin/). `torchpod plan` must name the network and put
the mount first; `torchpod doctor` must load the plugin from the mount, and fail a plugin
built for a newer libfabric ABI with the loader's own line."""

from __future__ import annotations

import json
import shutil

import pytest

from torchpod_toolkit.imagebuild.definitions import DEFAULT_IMAGE, load_definitions
from torchpod_toolkit.imagebuild.host import host_arch

from netplugin_build import build_set, compiler
from paths import ROOT

SITE = "/opt/torchpod/site/lib"


@pytest.fixture(scope="module")
def plugins(tmp_path_factory):
    cc = compiler()
    root = tmp_path_factory.mktemp("site")
    built = build_set(root, cc)
    sites = {}
    for kind in ("good", "broken"):
        d = root / f"site-{kind}"
        d.mkdir()
        shutil.copy(built[kind], d / "libnccl-net.so")
        shutil.copy(built["site_lib"] / "libfabric.so.1", d / "libfabric.so.1")
        sites[kind] = d
    sysfs = root / "sys"
    (sysfs / "class" / "cxi" / "cxi0" / "device").mkdir(parents=True)
    (sysfs / "class" / "net" / "hsn0").mkdir(parents=True)
    return sites, sysfs


def run(docker_client, label, site, sysfs, *args):
    defs = load_definitions(ROOT / "images")
    defn = defs[DEFAULT_IMAGE]
    ref = defn.ref(host_arch())
    c = docker_client.containers.run(
        ref, list(args), detach=True, labels=label, network_disabled=True,
        environment={"TORCHPOD_SYSFS_ROOT": "/fake/sys", "CUDA_VISIBLE_DEVICES": ""},
        volumes={str(site): {"bind": SITE, "mode": "ro"}, str(sysfs): {"bind": "/fake/sys", "mode": "ro"}})
    try:
        code = c.wait(timeout=120)["StatusCode"]
        return code, c.logs(stdout=True, stderr=False).decode(), c.logs(stdout=False, stderr=True).decode()
    finally:
        c.remove(force=True)


def test_plan_names_the_network_and_puts_the_mounted_plugin_first(plugins, docker_client, image_test_label):
    sites, sysfs = plugins
    code, out, err = run(docker_client, image_test_label, sites["good"], sysfs, "plan", "--format", "json",
                         "--", "train.py")
    assert code == 0, err
    env = json.loads(out)["env"]
    assert env["NCCL_NET"] == "AWS Libfabric" and env["LD_LIBRARY_PATH"].split(":")[0] == SITE
    assert env["FI_CXI_DISABLE_HOST_REGISTER"] == "1" and "NCCL_NET_PLUGIN" not in env


def test_doctor_loads_the_mounted_plugin(plugins, docker_client, image_test_label):
    sites, sysfs = plugins
    code, out, err = run(docker_client, image_test_label, sites["good"], sysfs, "doctor", "--format", "json")
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert checks["net-plugin"]["status"] == "ok", checks
    assert f"{SITE}/libnccl-net.so loads with RTLD_NOW" in checks["net-plugin"]["detail"]
    assert checks["net-plugin-api"]["status"] == "ok" and "'Libfabric'" in checks["net-plugin-api"]["detail"]
    assert checks["libfabric"]["detail"].startswith(f"{SITE}/libfabric.so.1 (version 1.17, ABI FABRIC_1.6)")


def test_doctor_fails_a_plugin_built_for_a_newer_libfabric(plugins, docker_client, image_test_label):
    sites, sysfs = plugins
    code, out, err = run(docker_client, image_test_label, sites["broken"], sysfs, "doctor", "--format", "json")
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert code == 1 and checks["net-plugin"]["status"] == "fail"
    assert "version `FABRIC_1.7' not found (required by" in checks["net-plugin"]["detail"]
