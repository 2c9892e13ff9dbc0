"""torchpod_toolkit.kube.operatorprobes, the part that needs no server: the paths a webhook
server must have a handler at, read from the webhook configurations (ready and
webhook_served against a real server: the integration tier's test_operatorprobes.py)."""

from __future__ import annotations

from torchpod_toolkit.kube import operatorprobes

WEBHOOK = {
    "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
    "metadata": {"name": "op-validating"},
    "webhooks": [{"name": "v.op.example.com",
                  "clientConfig": {"service": {"name": "op-webhook", "namespace": "ops", "path": "/validate-thing"}}}],
}


def test_the_webhook_paths_are_each_hooks_once():
    two = {**WEBHOOK, "webhooks": [*WEBHOOK["webhooks"], {"name": "m", "clientConfig": {"service": {"name": "s"}}}]}
    assert operatorprobes.webhook_paths([two, WEBHOOK]) == ["/", "/validate-thing"]  # no path: the server's root
    assert operatorprobes.webhook_paths([]) == []
