"""torchpod.fabric.efa: EFA devices (``efa_<n>``, or ``rdmap*`` after rdma-core's rename) are
found by name whatever their link layer; the plan sets nothing itself (the plugin does),
and a user's FI_PROVIDER that would keep libfabric off EFA is a finding."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchpod.fabric import efa
from torchpod.fabric.findings import Severity, info
from torchpod.fabric.sysfs import Inventory, Port


def inventory(*devices: str) -> Inventory:
    ports = tuple(Port(d, 1, "4: ACTIVE", "Unknown", ()) for d in devices)
    return Inventory(root=Path("/sys"), ports=ports, cxi=(), netdevs=("eth0",))


def no_socket_probe():
    raise AssertionError("EFA does not choose the socket interface")


@pytest.mark.parametrize("devices", [("efa_0",), ("rdmap16s27", "rdmap32s27")])
def test_efa_devices_are_found_and_set_nothing(devices):
    report = efa.detect({}, inventory(*devices), no_socket_probe)
    assert report.fabric == "efa" and report.env == ()
    assert [f.code for f in report.findings] == ["efa.found"] and ", ".join(devices) in report.notes[0]


@pytest.mark.parametrize("devices", [(), ("mlx5_0",), ("efa",), ("efa_0x",), ("rdmap16",), ("xefa_0",)])
def test_other_devices_are_not_efa(devices):
    assert efa.detect({}, inventory(*devices), no_socket_probe) is None


def test_a_users_fi_provider_other_than_efa_is_a_warning_and_kept():
    report = efa.detect({"FI_PROVIDER": "tcp"}, inventory("efa_0"), lambda: (None, info("socket.ifname.none", "-")))
    (warning,) = [f for f in report.findings if f.severity is Severity.WARN]
    assert warning.code == "efa.user.fi-provider" and "FI_PROVIDER='tcp'" in warning.message and warning.fix
    assert report.env == ()
    assert len(efa.detect({"FI_PROVIDER": "efa"}, inventory("efa_0"), no_socket_probe).findings) == 1
