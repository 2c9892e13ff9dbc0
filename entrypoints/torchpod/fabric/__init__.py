"""Network fabric detection: NCCL settings that depend on the node's RDMA devices.

The seam for RDMA detection (RoCE GID index, NCCL_IB_HCA). Each
detector in FABRICS takes ``(env, sysfs_root)`` and returns a FabricReport or None; the
first report wins. Its ``env`` is merged into the plan's env by the resolver, which never
overrides a variable the user set. Pure: reads only files under ``sysfs_root``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Optional


@dataclass(frozen=True)
class FabricReport:
    env: tuple[tuple[str, str], ...] = ()  # NCCL_* additions
    notes: tuple[str, ...] = ()


Detector = Callable[[Mapping[str, str], Path], Optional[FabricReport]]

# Ordered, most specific first. Empty for now: no fabric is configured automatically yet.
FABRICS: tuple[Detector, ...] = ()


def rdma_devices(sysfs_root: Path) -> tuple[str, ...]:
    folder = sysfs_root / "class" / "infiniband"
    try:
        return tuple(sorted(p.name for p in folder.iterdir()))
    except OSError:
        return ()


def detect_fabric(env: Mapping[str, str], sysfs_root: Path) -> FabricReport:
    for detector in FABRICS:
        report = detector(env, sysfs_root)
        if report is not None:
            return report
    devices = rdma_devices(sysfs_root)
    if not devices:
        return FabricReport(
            notes=(f"no RDMA fabric detected under {sysfs_root}/class/infiniband",)
        )
    return FabricReport(
        notes=(
            f"RDMA devices {', '.join(devices)} under {sysfs_root}/class/infiniband; "
            "NCCL picks its own defaults (no fabric detector configures them yet)",
        )
    )
