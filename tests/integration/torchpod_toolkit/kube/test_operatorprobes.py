"""torchpod_toolkit.kube.operatorprobes with a real server. ready: a GET answered 200, over plain HTTP
and over TLS, and nothing else. webhook_served against a TLS server holding the
harness's certificate: a path with a handler is served whatever it answers an empty
request, a path the server does not know (404, as a controller-runtime manager
answers before it registers its webhooks) is not, and neither is a server whose certificate
the CA did not sign, nor a port nothing listens on."""

from __future__ import annotations

import datetime
import http.server
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from torchpod_toolkit.kube import operatorprobes, plane, webhookcerts

NOW = datetime.datetime.now(datetime.timezone.utc)  # the certificates are valid from now


class _Handler(http.server.BaseHTTPRequestHandler):
    """Answers 200 at /mutate-thing, 400 (a malformed review) at /validate-thing, else 404."""

    def do_POST(self):  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        code = {"/mutate-thing": 200, "/validate-thing": 400}.get(self.path, 404)
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response({"/readyz": 200}.get(self.path, 503))
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def _serve(certs: Path | None) -> Iterator[int]:
    server = http.server.ThreadingHTTPServer((plane.LOOPBACK, 0), _Handler)
    if certs is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certs / "tls.crt", certs / "tls.key")
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def webhook_server(tmp_path) -> Iterator[tuple[int, Path]]:
    certs = tmp_path / "certs"
    webhookcerts.make_certs(certs, "op-ca", ["op-webhook.ops.svc"], NOW)
    for port in _serve(certs):
        yield port, certs / "ca.crt"


def test_a_path_with_a_handler_is_served_whatever_it_answers(webhook_server):
    port, ca = webhook_server
    assert operatorprobes.webhook_served(port, "/mutate-thing", ca)
    assert operatorprobes.webhook_served(port, "/validate-thing", ca)


def test_a_path_the_server_does_not_know_is_not_served(webhook_server):
    port, ca = webhook_server
    assert not operatorprobes.webhook_served(port, "/mutate-other", ca)


def test_another_cas_server_and_a_closed_port_are_not_served(webhook_server, tmp_path):
    port, _ = webhook_server
    other = tmp_path / "other"
    webhookcerts.make_certs(other, "other-ca", ["op-webhook.ops.svc"], NOW)
    assert not operatorprobes.webhook_served(port, "/mutate-thing", other / "ca.crt")  # TLS refuses it
    (closed,) = plane.free_ports(1)
    assert not operatorprobes.webhook_served(closed, "/mutate-thing", other / "ca.crt", timeout=1.0)


def test_ready_is_a_get_answered_200_over_http_or_tls(webhook_server):
    port, ca = webhook_server
    assert operatorprobes.ready(port, ca=ca) and not operatorprobes.ready(port, "/livez", ca=ca)  # 503: not ready
    for plain in _serve(None):
        assert operatorprobes.ready(plain) and not operatorprobes.ready(plain, "/livez")
        assert not operatorprobes.ready(plain, ca=ca)  # a TLS client against a plain server: no answer
    assert not operatorprobes.ready(port)  # a plain client against a TLS server: no status line
