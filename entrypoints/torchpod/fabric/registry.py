"""FABRICS: every fabric's record (torchpod.fabric.record), in the order detection tries
them. Most specific first: a Slingshot or EFA node may also show verbs devices, and
InfiniBand's link layer is unambiguous where RoCE's Ethernet is not."""

from __future__ import annotations

from ..errors import InputError
from . import efa, infiniband, roce, slingshot
from .record import Fabric

FABRICS: tuple[Fabric, ...] = (slingshot.FABRIC, efa.FABRIC, infiniband.FABRIC, roce.FABRIC)
NAMES = tuple(f.name for f in FABRICS)


def by_name(name: str | None) -> Fabric | None:
    """The record for a FabricReport's or a preset's fabric; None for None (nothing found)."""
    if name is None:
        return None
    for fabric in FABRICS:
        if fabric.name == name:
            return fabric
    raise InputError(f"fabric {name!r} is not known; expected one of {', '.join(NAMES)}")
