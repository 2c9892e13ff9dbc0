"""torchpod.fabric.record: a fabric reached through aws-ofi-nccl (a libfabric provider) needs
the plugin, and its plugin settings start with NCCL_NET, so a plugin that cannot load fails
NCCL's init instead of falling back to sockets."""

from __future__ import annotations

from torchpod.fabric import FABRICS
from torchpod.fabric.record import PLUGIN_NET, Fabric


def never(env, inv, socket_if):
    return None


def test_a_fabric_needs_the_plugin_exactly_when_it_names_a_libfabric_provider():
    assert not Fabric("ib", never, verbs_provider="mlx5").needs_plugin
    assert Fabric("x", never, fi_provider="cxi").needs_plugin


def test_every_plugin_fabric_names_the_network_first_and_others_set_nothing_for_a_plugin():
    assert (PLUGIN_NET.var, PLUGIN_NET.value) == ("NCCL_NET", "AWS Libfabric") and PLUGIN_NET.source
    for fabric in FABRICS:
        if fabric.needs_plugin:
            assert fabric.plugin_env[0] is PLUGIN_NET and fabric.lib_dirs and fabric.binds, fabric.name
            assert len({s.var for s in fabric.plugin_env}) == len(fabric.plugin_env), fabric.name
        else:
            assert fabric.plugin_env == () and fabric.verbs_provider, fabric.name
