"""Whether a control plane's components (``plane``) are ready: each one's health check
(etcd's ``/health`` over plain HTTP, the others' ``/readyz`` or ``/healthz`` over TLS with
the administrator's certificate), and the wait ``planestart.start`` makes for it, which
ends in one error carrying the end of the component's log when it exits or stays unhealthy.
"""

from __future__ import annotations

import http.client
import ssl
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from torchpod.errors import RuntimeFailure

from .plane import LOOPBACK, Ports, log_tail
from .planecerts import read_pem


def _tls(pki: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=read_pem(pki / "ca.crt").decode("ascii", "replace"))
    context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    return context


def probe(component: str, ports: Ports, pki: Path, timeout: float = 2.0) -> bool:
    """Whether ``component`` answers its health check with 200 ``ok`` (etcd: ``"health":"true"``)."""
    path, port = {"etcd": ("/health", ports.etcd), "kube-apiserver": ("/readyz", ports.apiserver),
                  "kube-controller-manager": ("/healthz", ports.controller_manager),
                  "kube-scheduler": ("/healthz", ports.scheduler)}[component]
    if component == "etcd":
        conn: http.client.HTTPConnection = http.client.HTTPConnection(LOOPBACK, port, timeout=timeout)
    else:
        conn = http.client.HTTPSConnection(LOOPBACK, port, timeout=timeout, context=_tls(pki))
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        body = response.read(4096).decode("utf-8", "replace")
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()
    return response.status == 200 and (body.strip() == "ok" or '"health":"true"' in body)


def await_healthy(component: str, process: subprocess.Popen[bytes], ports: Ports, root: Path, deadline: float,
                  clock: Callable[[], float]) -> None:
    """Until ``component`` is healthy; a component that exits or stays unhealthy past the
    deadline is one error carrying the end of its log."""
    log = root / "logs" / f"{component}.log"
    while not probe(component, ports, root / "pki"):
        code = process.poll()
        if code is not None or clock() > deadline:
            what = f"exited with {code}" if code is not None else "did not answer its health check in time"
            raise RuntimeFailure(f"{component} {what}; the end of {log}: {log_tail(log)}")
        time.sleep(0.2)
