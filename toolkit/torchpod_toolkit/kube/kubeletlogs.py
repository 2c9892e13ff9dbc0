"""The kubelet's container-log endpoint, for the stand-in: what `kubectl logs` reaches.

kubectl asks the API server for a pod's ``log`` subresource; the API server calls the pod's
node at ``https://<address>:<status.daemonEndpoints.kubeletEndpoint.Port>/containerLogs/
<namespace>/<pod>/<container>?follow=&previous=&timestamps=&tailLines=&limitBytes=`` with its
kubelet client certificate (kubernetes v1.37.2, pkg/registry/core/pod/strategy.go
LogLocation; the address is the first of ``--kubelet-preferred-address-types`` the Node
has). The kubelet answers with the container's output as text (pkg/kubelet/server/server.go
getContainerLogs): the current attempt's, or with ``previous`` the one before; 400 for a
query it cannot decode, 404 for a pod or container it does not run.

Here the same server answers for every node of the stand-in, on the Docker network's
gateway address with a certificate of the plane's CA for that address, and admits only the
API server's client certificate (``ADMITTED``). The containers are the stand-in's Docker
containers, found by their pod labels. ``parse`` and ``select`` are pure.
"""

from __future__ import annotations

import re
import ssl
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

# The API server's client certificate for kubelets (planecerts.make_pki), as kubeadm names it
ADMITTED = "kube-apiserver-kubelet-client"
_PATH = re.compile(r"/containerLogs/([^/]+)/([^/]+)/([^/]+)")
_WHOLE = re.compile(r"[0-9]{1,18}", re.ASCII)
_FLAGS = ("follow", "previous", "timestamps")


class BadRequest(ValueError):
    """A request the kubelet answers with 400."""


@dataclass(frozen=True)
class LogRequest:
    namespace: str
    pod: str
    container: str
    follow: bool = False
    previous: bool = False
    timestamps: bool = False
    tail_lines: int | None = None
    limit_bytes: int | None = None


def parse(target: str) -> LogRequest:
    """The request a path and query name, as getContainerLogs decodes them: booleans
    "true"/"false", whole numbers, ``tail=all`` for no tail; anything else is BadRequest.
    A path that is not /containerLogs/NS/POD/CONTAINER is a LookupError (404)."""
    parts = urlsplit(target)
    found = _PATH.fullmatch(parts.path)
    if not found:
        raise LookupError(f"no handler for {parts.path!r}")
    query = parse_qs(parts.query, keep_blank_values=True)
    if "tail" in query:  # the old name; "all" is no tail
        tail = query.pop("tail")
        if tail != ["all"]:
            query["tailLines"] = tail
    values: dict[str, Any] = {}
    for name in _FLAGS:
        given = query.pop(name, None)
        if given is not None:
            if len(given) != 1 or given[0] not in ("true", "false"):
                raise BadRequest(f"{name}={given!r}: expected true or false")
            values[name] = given[0] == "true"
    for name, key in (("tailLines", "tail_lines"), ("limitBytes", "limit_bytes")):
        given = query.pop(name, None)
        if given is not None:
            if len(given) != 1 or not _WHOLE.fullmatch(given[0]):
                raise BadRequest(f"{name}={given!r}: expected a whole number")
            values[key] = int(given[0])
    if values.get("limit_bytes") == 0:
        raise BadRequest("limitBytes must be greater than zero")  # ValidatePodLogOptions
    namespace, pod, container = (unquote(g) for g in found.groups())
    return LogRequest(namespace, pod, container, **values)


def select(attempts: Sequence[tuple[int, Any]], previous: bool) -> Any:
    """The attempt a request reads from ``(attempt number, container)`` pairs: the newest, or
    with ``previous`` the one before it; LookupError when there is none."""
    ordered = sorted(attempts, key=lambda a: a[0])
    wanted = ordered[-2:-1] if previous else ordered[-1:]
    if not wanted:
        raise LookupError("previous terminated container not found" if previous and ordered
                          else "container has not started")
    return wanted[0][1]


def shaped(data: bytes, request: LogRequest) -> bytes:
    """The last ``tail_lines`` lines, then at most ``limit_bytes`` bytes, as the kubelet cuts them."""
    if request.tail_lines is not None:
        lines = data.splitlines(keepends=True)
        data = b"".join(lines[len(lines) - request.tail_lines:] if request.tail_lines else [])
    if request.limit_bytes is not None:
        data = data[:request.limit_bytes]
    return data


Attempts = Callable[[LogRequest], Sequence[tuple[int, Any]]]


def _handler(attempts: Attempts) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's name)
            return

        def _fail(self, status: int, message: str) -> None:
            body = message.encode("utf-8", "replace")
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            cert = self.connection.getpeercert() if isinstance(self.connection, ssl.SSLSocket) else None
            subject: Any = (cert or {}).get("subject", ())  # ((("commonName", NAME),), ...), as ssl gives it
            common = [pair[1] for rdn in subject for pair in rdn if pair[0] == "commonName"]
            if common != [ADMITTED]:
                self._fail(403, f"Forbidden (user={common[:1]}, verb=get, resource=nodes, subresource=proxy)")
                return
            try:
                request = parse(self.path)
                container = select(attempts(request), request.previous)
            except BadRequest as exc:
                self._fail(400, f'{{"message": "Unable to decode query: {exc}"}}')
                return
            except LookupError as exc:
                self._fail(404, str(exc))
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            if request.follow and request.tail_lines is None and request.limit_bytes is None:
                for chunk in container.logs(stream=True, follow=True, timestamps=request.timestamps):
                    self.wfile.write(chunk)
                    self.wfile.flush()
                return
            self.wfile.write(shaped(container.logs(timestamps=request.timestamps), request))

    return Handler


class LogServer:
    """The endpoint on ``address``:``port`` (0: any free port), TLS with ``cert``/``key`` and
    client certificates of ``ca`` required."""

    def __init__(self, address: str, attempts: Attempts, ca: Path, cert: Path, key: Path, port: int = 0) -> None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(cert, key)
        context.load_verify_locations(cafile=ca)
        context.verify_mode = ssl.CERT_REQUIRED
        self.httpd = ThreadingHTTPServer((address, port), _handler(attempts))
        self.httpd.daemon_threads = True
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="kubelet-logs", daemon=True)

    def start(self) -> LogServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
