"""The readiness checks of an operator's programs on loopback, which ``operators.start`` waits
on: a health server's answer (controller-runtime's ``/readyz``, which upstream makes wait for
its webhook server; Volcano's three ``/healthz``) and a handler at every path the webhook
configurations name (``webhook_served``). Over TLS, each is verified against the CA
``webhookcerts`` made. Nothing here starts a process.
"""

from __future__ import annotations

import http.client
import ssl
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from torchpod_toolkit.kube import plane


def _status(port: int, method: str, path: str, ca: Path | None, timeout: float, body: bytes | None = None,
            headers: Mapping[str, str] | None = None) -> int | None:
    """The status a server on loopback ``port`` answers ``method path`` with (over TLS verified
    against ``ca`` where one is given), or None when it does not answer."""
    conn: http.client.HTTPConnection
    if ca is None:
        conn = http.client.HTTPConnection(plane.LOOPBACK, port, timeout=timeout)
    else:
        conn = http.client.HTTPSConnection(plane.LOOPBACK, port, timeout=timeout,
                                           context=ssl.create_default_context(cafile=str(ca)))
    try:
        conn.request(method, path, body=body, headers=dict(headers or {}))
        return conn.getresponse().status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def ready(port: int, path: str = "/readyz", timeout: float = 2.0, ca: Path | None = None) -> bool:
    """Whether the health server on ``port`` answers ``path`` with 200; over TLS, verified
    against ``ca``, where one is given."""
    return _status(port, "GET", path, ca, timeout) == 200


def webhook_paths(webhooks: Iterable[Mapping[str, Any]]) -> list[str]:
    """The path of each webhook the configurations name (as
    ``operatormanifests.rewrite_webhooks`` reads them), sorted, once each."""
    return sorted({((hook.get("clientConfig") or {}).get("service") or {}).get("path") or "/"
                   for config in webhooks for hook in config.get("webhooks") or []})


def webhook_served(port: int, path: str, ca: Path, timeout: float = 2.0) -> bool:
    """Whether the webhook server on ``port`` has a handler at ``path``: an empty request that
    is not JSON gets any answer but 404, over TLS verified against ``ca`` (not JSON: Volcano
    v1.10.0's handler returns at once on one, and panics on an empty JSON review, whose
    request is nil: pkg/webhooks/router/server.go, ``Serve``). A controller-runtime
    manager answers its readiness check once its webhook server listens, and JobSet v0.12.0 and
    LWS v0.9.0 register their webhooks' paths later, from a goroutine that waits for the
    certificates (main.go and cmd/main.go, ``go setupControllers``): until then the server
    answers 404, and the API server refuses every object the webhook admits ("failed calling
    webhook ...: the server could not find the requested resource")."""
    status = _status(port, "POST", path, ca, timeout, body=b"", headers={"Content-Type": "text/plain"})
    return status is not None and status != 404

