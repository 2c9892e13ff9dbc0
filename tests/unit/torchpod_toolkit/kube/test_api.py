"""torchpod_toolkit.kube.api: an error status of the API becomes one ApiError naming the
call, its status, reason and message (bounded), and ``find`` turns 404 into None."""

from __future__ import annotations

import pytest

from torchpod_toolkit.kube import api


def test_an_api_error_names_the_call_and_the_apis_words():
    error = api.ApiError("GET", "/api/v1/nodes/x", 403, {"reason": "Forbidden", "message": "m" * 5000})
    assert str(error).startswith("GET /api/v1/nodes/x: 403 Forbidden: mmm") and len(error.message) == 2000
    assert error.status == 403 and error.reason == "Forbidden"


class Answers(api.Client):
    def __init__(self, status):  # no certificate: request is replaced
        self.status = status

    def request(self, method, path, body=None, *, query=None, content_type="application/json"):
        if self.status >= 400:
            raise api.ApiError(method, path, self.status, {"reason": "x"})
        return {"path": path, "query": query}


def test_find_is_none_only_for_not_found():
    assert Answers(404).find("/x") is None
    assert Answers(200).get("/x", fieldSelector="spec.nodeName=n") == {"path": "/x",
                                                                        "query": {"fieldSelector": "spec.nodeName=n"}}
    with pytest.raises(api.ApiError):
        Answers(403).find("/x")
