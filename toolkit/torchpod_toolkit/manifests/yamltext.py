"""The one YAML writer of the rendered files: Kubernetes objects and SkyPilot tasks alike.
Pure."""

from __future__ import annotations

import yaml


class _Dumper(yaml.SafeDumper):
    """Plain YAML: a shared template is written out in full, never as an &anchor."""

    def ignore_aliases(self, data) -> bool:
        return True


def dump(docs) -> str:
    """``docs`` as one YAML stream, documents separated by ``---`` lines."""
    return "---\n".join(yaml.dump(d, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120)
                         for d in docs)
