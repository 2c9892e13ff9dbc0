"""torchpod.fabric.site: where a site injects the NCCL net plugin a fabric needs, and what the
plan then sets. Sysfs and site directories are temp trees modelled on real nodes (no EFA or
Slingshot NIC here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchpod.errors import InputError
from torchpod.fabric import site
from torchpod.schedulers.common import Facts

from fabric_cases import FIXTURES, write_node
from launcher_cases import plan_for

SLINGSHOT = {"NCCL_NET": "AWS Libfabric", "NCCL_NET_GDR_LEVEL": "PHB", "NCCL_CROSS_NIC": "1",
             "FI_CXI_DISABLE_HOST_REGISTER": "1", "FI_MR_CACHE_MONITOR": "userfaultfd",
             "FI_CXI_DEFAULT_CQ_SIZE": "131072"}


def inject(root: Path, directory: str, *names: str) -> None:
    d = root / directory.lstrip("/")
    d.mkdir(parents=True, exist_ok=True)
    for name in names:
        (d / name).write_bytes(b"\x7fELF")


def plan_env(tmp_path: Path, fixture: str, env: dict | None = None) -> tuple[dict, tuple[str, ...]]:
    sysfs, _ = write_node(tmp_path, FIXTURES[fixture])
    plan = plan_for({**(env or {}), "CUDA_VISIBLE_DEVICES": ""},
                    facts=Facts(hostname="nid001", root=tmp_path, sysfs_root=sysfs))
    return dict(plan.env), plan.notes


def test_slingshot_with_an_injected_plugin_names_the_network_and_puts_the_site_first(tmp_path):
    inject(tmp_path, site.SITE_LIB, "libnccl-net.so", "libfabric.so.1", "libcxi.so.1")
    env, notes = plan_env(tmp_path, "gh200_slingshot_node", {"LD_LIBRARY_PATH": "/usr/local/cuda/lib64"})
    assert env["LD_LIBRARY_PATH"] == f"{site.SITE_LIB}:/usr/local/cuda/lib64"  # a prepend: the user's path stays
    assert {k: env[k] for k in SLINGSHOT} == SLINGSHOT
    assert "NCCL_NET_PLUGIN" not in env  # it would stop NCCL trying the injected libnccl-net.so
    assert any("from the mount point /opt/torchpod/site/lib" in n for n in notes)


def test_slingshot_without_a_plugin_sets_no_net_and_says_why(tmp_path):
    env, notes = plan_env(tmp_path, "gh200_slingshot_node")
    assert "NCCL_NET" not in env and "LD_LIBRARY_PATH" not in env
    assert any(n.startswith("no NCCL net plugin: none injected") for n in notes)


def test_efa_finds_the_efa_installers_plugin_and_keeps_the_users_nccl_net(tmp_path):
    inject(tmp_path, "/opt/amazon/ofi-nccl/lib", "libnccl-net-ofi.so", "libnccl-net.so")
    inject(tmp_path, "/opt/amazon/efa/lib", "libfabric.so.1")
    env, notes = plan_env(tmp_path, "aws_efa_node", {"NCCL_NET": "Libfabric"})
    assert env["LD_LIBRARY_PATH"] == "/opt/amazon/ofi-nccl/lib:/opt/amazon/efa/lib"
    assert "NCCL_NET" not in env and "FI_CXI_DEFAULT_CQ_SIZE" not in env  # the user's wins; no Slingshot settings
    assert any("kept user-set NCCL_NET" in n for n in notes)


def test_the_images_own_plugin_is_named_by_absolute_path_when_nothing_is_injected(tmp_path):
    inject(tmp_path, str(Path(site.IMAGE_PLUGIN).parent), "libnccl-net.so")
    env, _ = plan_env(tmp_path, "aws_efa_node")
    assert env["NCCL_NET_PLUGIN"] == site.IMAGE_PLUGIN and env["NCCL_NET"] == "AWS Libfabric"


def test_roce_ignores_an_injected_plugin(tmp_path):
    inject(tmp_path, site.SITE_LIB, "libnccl-net.so")
    env, _ = plan_env(tmp_path, "roce_bonded_mlx5_ipv4_and_ipv6_both_versions")
    assert env.get("NCCL_NET") == "IB" and "LD_LIBRARY_PATH" not in env  # the plugin is not in play: pinned


@pytest.mark.parametrize("value, make, needle", [
    ("/site/lib", [], "holds no libnccl-net*.so"),
    ("/nope", None, "'/nope', which is not a directory"),
])
def test_torchpod_site_lib_is_authoritative(tmp_path, value, make, needle):
    if make is not None:
        inject(tmp_path, value, "libfabric.so.1")
    with pytest.raises(InputError, match="TORCHPOD_SITE_LIB") as err:
        site.find({"TORCHPOD_SITE_LIB": value}, tmp_path)
    assert needle in str(err.value)


def test_torchpod_site_lib_wins_over_the_mount_point(tmp_path):
    inject(tmp_path, site.SITE_LIB, "libnccl-net.so")
    inject(tmp_path, "/site/a", "libnccl-net-ofi.so")
    inject(tmp_path, "/site/b", "libfabric.so.1")
    libs = site.find({"TORCHPOD_SITE_LIB": "/site/a:/site/b"}, tmp_path)
    assert libs.dirs == ("/site/a", "/site/b") and libs.plugin == "/site/a/libnccl-net-ofi.so"
    assert libs.libfabric == "/site/b/libfabric.so.1"


def test_the_deps_mount_point_joins_the_search_path(tmp_path):
    inject(tmp_path, site.SITE_LIB, "libnccl-net.so")
    inject(tmp_path, site.SITE_DEPS, "libcxi.so.1")
    inject(tmp_path, "/opt/cray/libfabric/1.22.0/lib64", "libfabric.so.1")
    libs = site.find({}, tmp_path)
    assert libs.dirs == (site.SITE_LIB, site.SITE_DEPS, "/opt/cray/libfabric/1.22.0/lib64")
    assert libs.libfabric == "/opt/cray/libfabric/1.22.0/lib64/libfabric.so.1"
