"""NCCL_IB_HCA, as NCCL parses it (src/misc/utils.cc parseStringList / matchIfList): a
leading ``^`` excludes, a leading ``=`` means exact names (without it ``mlx5_1`` is a
prefix that also matches ``mlx5_10``), ``:N`` names a port."""

from __future__ import annotations

from typing import Sequence


def value(devices: Sequence[tuple[str, int]]) -> str:
    """``=dev[:port],...`` for the chosen (device, port) pairs; the port only when not 1."""
    return "=" + ",".join(d if p == 1 else f"{d}:{p}" for d, p in devices)


def selects(spec: str, device: str, port: int) -> bool:
    """Whether ``spec`` (a user's NCCL_IB_HCA) selects ``device``'s ``port``."""
    text = spec.strip()
    exclude = text.startswith("^")
    text = text.lstrip("^")
    exact = text.startswith("=")
    text = text.lstrip("=")
    hit = False
    for item in (i.strip() for i in text.split(",") if i.strip()):
        name, _, want = item.partition(":")
        if (device == name if exact else device.startswith(name)) and (not want or want == str(port)):
            hit = True
    return not hit if exclude else hit
