"""torchpod_toolkit.kube.kubeletlogs: the container-log endpoint the API server calls for
`kubectl logs`, its query decoded as the kubelet decodes it, served over TLS to the API
server's client certificate alone. (On the real plane: tests/cluster/test_first_job_pages.py.)"""

from __future__ import annotations

import datetime
import http.client
import ssl

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchpod_toolkit.kube import kubeletlogs, planecerts
from torchpod_toolkit.kube.kubeletlogs import BadRequest, LogRequest, parse, select, shaped


def test_the_api_servers_query_is_decoded_as_the_kubelet_decodes_it():
    """The parameters LogLocation writes (kubernetes v1.37.2 pkg/registry/core/pod/strategy.go)."""
    assert parse("/containerLogs/ml/train-worker-0/pytorch?follow=true&tailLines=20&timestamps=true") == LogRequest(
        "ml", "train-worker-0", "pytorch", follow=True, timestamps=True, tail_lines=20)
    assert parse("/containerLogs/ml/p/c?previous=true&limitBytes=100") == LogRequest(
        "ml", "p", "c", previous=True, limit_bytes=100)
    assert parse("/containerLogs/ml/p/c?tail=all") == LogRequest("ml", "p", "c")
    assert parse("/containerLogs/ml/p/c?tail=5").tail_lines == 5


@pytest.mark.parametrize("query", ["follow=yes", "tailLines=-1", "tailLines=x", "limitBytes=0", "previous=",
                                   "tailLines=1&tailLines=2"])
def test_a_query_the_kubelet_cannot_decode_is_a_bad_request(query):
    with pytest.raises(BadRequest):
        parse(f"/containerLogs/ml/p/c?{query}")


@pytest.mark.parametrize("path", ["/containerLogs/ml/p", "/containerLogs/ml/p/c/x", "/exec/ml/p/c", "/"])
def test_another_path_is_not_found(path):
    with pytest.raises(LookupError):
        parse(path)


def test_previous_is_the_attempt_before_the_newest():
    attempts = [(2, "third"), (0, "first"), (1, "second")]
    assert select(attempts, previous=False) == "third" and select(attempts, previous=True) == "second"
    with pytest.raises(LookupError, match="previous terminated container not found"):
        select([(0, "only")], previous=True)


@given(lines=st.lists(st.binary(max_size=8).filter(lambda b: b"\n" not in b and b"\r" not in b), max_size=8),
       tail=st.none() | st.integers(0, 10), limit=st.none() | st.integers(1, 40))
def test_tail_then_limit_cut_the_output(lines, tail, limit):
    data = b"".join(line + b"\n" for line in lines)
    out = shaped(data, LogRequest("n", "p", "c", tail_lines=tail, limit_bytes=limit))
    kept = lines if tail is None else lines[len(lines) - tail:] if tail else []
    assert out == b"".join(line + b"\n" for line in kept)[:limit]


class Attempt:
    def __init__(self, text: bytes) -> None:
        self.text = text

    def logs(self, timestamps: bool = False, **_: object) -> bytes:
        return self.text


@pytest.fixture
def served(tmp_path):
    pki = tmp_path / "pki"
    planecerts.make_pki(pki, datetime.datetime.now(datetime.timezone.utc))
    cert = planecerts.issue_server(pki, "kubelet", "torchpod-kubelet", ["127.0.0.1"])

    def attempts(request: LogRequest):
        if request.pod != "train-0":
            raise LookupError(f"pod {request.pod!r} does not exist")
        return [(0, Attempt(b"first run\n")), (1, Attempt(b"one\ntwo\nTORCHPOD_RESULT {}\n"))]

    server = kubeletlogs.LogServer("127.0.0.1", attempts, pki / "ca.crt", cert, cert.with_suffix(".key")).start()
    yield pki, server.port
    server.stop()


def get(pki, port: int, path: str, client: str | None) -> tuple[int, bytes]:
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    if client:
        context.load_cert_chain(pki / f"{client}.crt", pki / f"{client}.key")
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_the_api_servers_certificate_reads_the_newest_attempt_and_the_one_before(served):
    pki, port = served
    assert get(pki, port, "/containerLogs/ml/train-0/pytorch?tailLines=1", planecerts.KUBELET_CLIENT) == (
        200, b"TORCHPOD_RESULT {}\n")
    assert get(pki, port, "/containerLogs/ml/train-0/pytorch?previous=true", planecerts.KUBELET_CLIENT) == (
        200, b"first run\n")
    assert get(pki, port, "/containerLogs/ml/other/pytorch", planecerts.KUBELET_CLIENT)[0] == 404
    assert get(pki, port, "/containerLogs/ml/train-0/pytorch?follow=maybe", planecerts.KUBELET_CLIENT)[0] == 400


def test_any_other_client_is_refused(served):
    """Another certificate of the same CA (the cluster admin's) is forbidden; no certificate
    at all does not get past the handshake."""
    pki, port = served
    assert get(pki, port, "/containerLogs/ml/train-0/pytorch", "admin")[0] == 403
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        get(pki, port, "/containerLogs/ml/train-0/pytorch", None)
