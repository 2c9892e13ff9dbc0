"""torchpod_toolkit.kube.planehealth: a health check reads what a server answers (etcd's
``"health":"true"`` or not; the others' ``ok`` over TLS, the server's certificate checked
against the cluster CA), and a port nothing listens on is unhealthy, not an error."""

from __future__ import annotations

import datetime
import http.server
import ssl
import threading

import pytest

from torchpod_toolkit.kube import plane, planecerts, planehealth


class _Health(http.server.BaseHTTPRequestHandler):
    body = b'{"health":"true","reason":""}'

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(200 if self.path in ("/health", "/readyz") else 404)
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("body, healthy", [(b'{"health":"true","reason":""}', True),
                                           (b'{"health":"false","reason":"NOSPACE"}', False)])
def test_etcds_health_is_read_from_its_answer(tmp_path, body, healthy):
    server = http.server.HTTPServer(("127.0.0.1", 0), type("Health", (_Health,), {"body": body}))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        ports = plane.Ports(server.server_address[1], 1, 1, 1, 1)
        assert planehealth.probe("etcd", ports, tmp_path) is healthy
    finally:
        server.shutdown()
        server.server_close()
    assert planehealth.probe("etcd", ports, tmp_path, timeout=0.5) is False  # nothing listens now


def test_the_api_servers_readiness_is_asked_over_tls_with_the_cluster_ca(tmp_path):
    pki = tmp_path / "pki"
    planecerts.make_pki(pki, datetime.datetime.now(datetime.timezone.utc))
    server = http.server.HTTPServer(("127.0.0.1", 0), type("Ready", (_Health,), {"body": b"ok"}))
    served = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    served.load_cert_chain(str(pki / "apiserver.crt"), str(pki / "apiserver.key"))
    server.socket = served.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        ports = plane.Ports(1, 1, server.server_address[1], 1, 1)
        assert planehealth.probe("kube-apiserver", ports, pki) is True
        other = tmp_path / "other"
        planecerts.make_pki(other, datetime.datetime.now(datetime.timezone.utc))
        assert planehealth.probe("kube-apiserver", ports, other) is False  # another CA: the server is not trusted
    finally:
        server.shutdown()
        server.server_close()
