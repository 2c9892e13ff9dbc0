"""torchpod.values: a rendezvous endpoint written and read back (IPv6 literals bracketed as
torch's parse_rendezvous_endpoint wants)."""

from __future__ import annotations

import pytest

from torchpod.values import Endpoint, split_endpoint


@pytest.mark.parametrize(
    "host, port, text",
    [("node1", 29400, "node1:29400"), ("::1", 1, "[::1]:1"), ("[fd00::2]", 5, "[fd00::2]:5")],
)
def test_endpoint_brackets_ipv6(host, port, text):
    assert str(Endpoint(host.strip("[]"), port)) == text
    assert Endpoint.parse("E", text) == Endpoint(host.strip("[]"), port)
    back = split_endpoint(text)
    assert back == (host.strip("[]"), str(port))
