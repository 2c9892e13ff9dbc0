"""torchpod_toolkit.manifests.yamltext: one YAML stream, a shared object written out in full."""

from __future__ import annotations

import yaml

from torchpod_toolkit.manifests import yamltext


def test_documents_are_one_stream_and_a_shared_object_is_written_twice_not_anchored():
    shared = {"name": "shm", "emptyDir": {"medium": "Memory"}}
    text = yamltext.dump([{"kind": "A", "volumes": [shared, shared]}, {"kind": "B"}])
    assert "&" not in text and "*" not in text
    assert list(yaml.safe_load_all(text)) == [{"kind": "A", "volumes": [shared, shared]}, {"kind": "B"}]
    assert text.count("---\n") == 1 and text.index("kind: A") < text.index("kind: B")
