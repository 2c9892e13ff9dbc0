"""A small client of the Kubernetes API over HTTPS with a client certificate, as
``plane`` probes it: JSON in and out, a bounded response, one connection per request (so
threads share a client), and the API's Status turned into one error naming the call.

Only what the kubelet stand-in asks: get, list, create, merge-patch and delete. No watch:
callers poll.
"""

from __future__ import annotations

import http.client
import json
import ssl
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torchpod.errors import RuntimeFailure

MAX_BODY = 32 * 2**20  # bytes of one response read at most
MERGE = "application/merge-patch+json"


class ApiError(RuntimeFailure):
    """The API answered a request with an error status."""

    def __init__(self, method: str, path: str, status: int, body: Mapping[str, Any]) -> None:
        self.status, self.reason = status, str(body.get("reason", ""))
        self.message = str(body.get("message", ""))[:2000]
        super().__init__(f"{method} {path}: {status} {self.reason}: {self.message}")


class Client:
    """Requests to one API server with one client certificate."""

    def __init__(self, host: str, port: int, ca: Path, cert: Path, key: Path, timeout: float = 30.0) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self._context = ssl.create_default_context(cafile=str(ca))
        self._context.load_cert_chain(str(cert), str(key))

    def request(self, method: str, path: str, body: object = None, *, query: Mapping[str, str] | None = None,
                content_type: str = "application/json") -> dict[str, Any]:
        """One request; the decoded JSON answer, or ApiError for a status of 400 or more."""
        target = path + ("?" + urllib.parse.urlencode(dict(query)) if query else "")
        conn = http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout, context=self._context)
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data, headers["Content-Type"] = json.dumps(body).encode("utf-8"), content_type
        try:
            conn.request(method, target, body=data, headers=headers)
            response = conn.getresponse()
            raw = response.read(MAX_BODY + 1)
        except (OSError, http.client.HTTPException) as exc:
            raise RuntimeFailure(f"{method} {path}: {exc}") from None
        finally:
            conn.close()
        try:
            decoded = json.loads(raw[:MAX_BODY]) if raw else {}
        except ValueError:
            decoded = {"message": raw[:500].decode("utf-8", "replace")}
        if response.status >= 400:
            raise ApiError(method, path, response.status, decoded if isinstance(decoded, dict) else {})
        return decoded if isinstance(decoded, dict) else {}

    def get(self, path: str, **query: str) -> dict[str, Any]:
        return self.request("GET", path, query=query or None)

    def find(self, path: str) -> dict[str, Any] | None:
        """The object at ``path``, or None when the API says it does not exist."""
        try:
            return self.get(path)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def create(self, path: str, body: object) -> dict[str, Any]:
        return self.request("POST", path, body)

    def patch(self, path: str, body: object) -> dict[str, Any]:
        return self.request("PATCH", path, body, content_type=MERGE)

    def delete(self, path: str, body: object = None) -> dict[str, Any]:
        return self.request("DELETE", path, body)
