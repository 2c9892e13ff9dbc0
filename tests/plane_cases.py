"""What the control plane's unit tests share: a fixed moment for the certificates, the
ports a prepared plane is written for, and the folder ``planestart.prepare`` makes of them."""

from __future__ import annotations

import datetime
from pathlib import Path

from torchpod_toolkit.kube import plane, planestart

NOW = datetime.datetime(2026, 11, 27, 12, 0, tzinfo=datetime.timezone.utc)
PORTS = plane.Ports(etcd=32379, etcd_peer=32380, apiserver=36443, controller_manager=30257, scheduler=30259)


def prepared_plane(tmp_path_factory) -> Path:
    """A plane's folder as ``planestart.prepare`` writes it (certificates, kubeconfigs, argv)."""
    root = tmp_path_factory.mktemp("plane")
    planestart.prepare(root, PORTS, NOW)
    return root
