"""torchpod.schedulers.common: finding this host in a scheduler's host list, short and fully
qualified names, addresses, and the ambiguity it refuses."""

from __future__ import annotations

import pytest

from torchpod.errors import InputError
from torchpod.schedulers.common import find_host


def test_host_matching_short_and_fqdn():
    hosts = ("n1.cluster.local", "n2.cluster.local")
    assert find_host(hosts, "n2") == 1
    assert find_host(hosts, "N2.CLUSTER.LOCAL") == 1
    assert find_host(("n1", "n2"), "n2.cluster.local") == 1
    assert find_host(hosts, "n3") is None
    assert find_host(("10.0.0.1", "10.0.0.2"), "10.0.0.2") == 1
    assert find_host(("10.0.0.1",), "10.0.0.2") is None  # no "short form" of an address


def test_find_host_refuses_a_short_name_that_matches_two_hosts():
    with pytest.raises(InputError, match=r"'n1\.a\.example' and 'n1\.b\.example'"):
        find_host(("n1.a.example", "n1.b.example"), "n1")
    # the same host spelt twice is no ambiguity; an exact match wins over short forms
    assert find_host(("n1.a.example", "N1.A.EXAMPLE", "n2"), "n1") == 0
    assert find_host(("n1.a.example", "n1.b.example"), "n1.b.example") == 1
