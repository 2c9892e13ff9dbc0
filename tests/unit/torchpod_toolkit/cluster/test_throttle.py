"""torchpod_toolkit.cluster.throttle, its pure parts: the tc argvs for a slow node and a slow
link, and the values they refuse. (Running them in a container's namespace is the cluster
tier's: tests/cluster/test_preflight.py.)"""

from __future__ import annotations

import pytest

from torchpod.errors import InputError
from torchpod_toolkit.cluster import throttle


def test_a_node_is_one_tbf_on_the_root_of_eth0_in_the_containers_namespace():
    assert throttle.node_commands(4242) == [
        ["nsenter", "-t", "4242", "-n", "tc", "qdisc", "add", "dev", "eth0", "root",
         "tbf", "rate", "100mbit", "burst", "64kb", "latency", "400ms"]]


def test_a_link_sends_only_the_other_ends_traffic_to_the_slow_class():
    argvs = throttle.link_commands(7, "172.18.0.3", "50mbit")
    assert all(a[:5] == ["nsenter", "-t", "7", "-n", "tc"] for a in argvs)
    root, fast, slow, match = (a[5:] for a in argvs)
    assert root == ["qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "10"]
    assert fast[-2:] == ["rate", "100gbit"] and "1:10" in fast  # everything else: unbounded
    assert slow[slow.index("rate") + 1] == "50mbit" and "1:20" in slow
    assert match[-4:] == ["dst", "172.18.0.3/32", "flowid", "1:20"]


@pytest.mark.parametrize("pid", [0, -1, True, "12", 1.5, None])
def test_a_pid_that_is_not_a_running_process_is_refused(pid):
    with pytest.raises(InputError, match=r"^throttle pid=.*; expected a running container's PID"):
        throttle.node_commands(pid)


@pytest.mark.parametrize("rate", ["", "100", "100 mbit", "0mbit", "100mbit; reboot", "1e3mbit", "100MBIT", None])
def test_a_rate_tc_would_misread_is_refused(rate):
    with pytest.raises(InputError, match=r"^throttle rate=.*; expected digits then kbit, mbit or gbit"):
        throttle.node_commands(1, rate)


@pytest.mark.parametrize("address", ["", "172.18.0.300", "172.18.0.3/24", "::1", "host; rm -rf /", None])
def test_an_address_that_is_not_one_ipv4_address_is_refused(address):
    with pytest.raises(InputError, match=r"^throttle address=.*; expected an IPv4 address"):
        throttle.link_commands(1, address)
