"""GB200-class nodes: the IMEX channel multi-node NVLink needs, and NCCL_MNNVL_ENABLE.

NCCL (NVIDIA/nccl v2.30.7-1 src/init.cc, src/mnnvl.cc): NCCL_MNNVL_ENABLE is 2 (auto) by
default, 1 forces multi-node NVLink, 0 disables it. On a node whose GPUs sit in an NVLink
clique NCCL allocates a FABRIC-handle buffer at init; without an IMEX channel
(/dev/nvidia-caps-imex-channels/channelN, given to the container by the IMEX daemon's
ComputeDomain or by hand) that fails and NCCL stops with "MNNVL ... is available but not
working ... Set NCCL_MNNVL_ENABLE=0 to ignore this issue".

GB200-class: a GPU whose /proc/driver/nvidia/gpus/<bus>/information "Model:" names a
GB200 or GB300 (the NVL72 racks). Pure: reads under the roots it is given, bounded.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Mapping

from .. import readers
from ..errors import InputError
from .findings import Finding, Severity, ok

CHANNELS_DIR = "dev/nvidia-caps-imex-channels"
_CHANNEL_RE = re.compile(r"channel[0-9]{1,5}", re.ASCII)
_MNNVL_MODEL_RE = re.compile(r"^Model:\s*.*\bGB[23]00\b", re.M | re.ASCII)
MAX_ENTRIES = 4096  # a directory listing is bounded like every read


def _listing(path: Path) -> list[str]:
    try:
        with os.scandir(path) as it:
            names = []
            for entry in it:
                names.append(entry.name)
                if len(names) >= MAX_ENTRIES:
                    break
            return names
    except OSError:
        return []


def channels(root: Path) -> list[str]:
    return sorted(n for n in _listing(root / CHANNELS_DIR) if _CHANNEL_RE.fullmatch(n))


def gb200_class(proc_root: Path) -> bool:
    """True when a GPU's information file names a GB200/GB300."""
    gpus = proc_root / "driver" / "nvidia" / "gpus"
    for bus in sorted(_listing(gpus))[:64]:
        try:
            text = readers.read_text(gpus / bus / "information", what=f"{gpus}/{bus!r}/information",
                                     cap=readers.ATTR_CAP, expected="the NVIDIA driver's GPU information")
        except InputError:
            continue
        if _MNNVL_MODEL_RE.search(text):
            return True
    return False


def check(env: Mapping[str, str], root: Path, proc_root: Path) -> list[Finding]:
    """Findings for IMEX channels against NCCL_MNNVL_ENABLE (none on a node with neither)."""
    found = channels(root)
    given = env.get("NCCL_MNNVL_ENABLE")
    mnnvl_node = gb200_class(proc_root)
    shown = f"{len(found)} IMEX channel(s) ({', '.join(found[:4])})" if found else "no IMEX channel"
    where = f"/{CHANNELS_DIR}"
    if given is not None and given.strip() not in ("0", "1", "2"):
        return [Finding("imex.mnnvl.bad-value", Severity.WARN, f"NCCL_MNNVL_ENABLE={given!r}: expected 0, 1 or 2",
                        "set 0 (off), 1 (force) or 2 (auto, the default), or unset it")]
    value = given.strip() if given is not None else "2"
    if value == "1" and not found:
        return [Finding("imex.mnnvl.no-channel", Severity.FAIL, f"NCCL_MNNVL_ENABLE=1 forces multi-node NVLink but "
                        f"{where} holds no channel: NCCL fails at init", _FIX)]
    if value == "2" and mnnvl_node and not found:
        return [Finding("imex.mnnvl.no-channel", Severity.FAIL, f"GB200-class GPUs and no IMEX channel under {where}: "
                        "NCCL's multi-node NVLink check fails at init", _FIX + ", or NCCL_MNNVL_ENABLE=0")]
    if value == "0" and (found or mnnvl_node):
        return [Finding("imex.mnnvl.disabled", Severity.WARN, f"NCCL_MNNVL_ENABLE=0 on a node with {shown}"
                        f"{' and GB200-class GPUs' if mnnvl_node else ''}: multi-node NVLink is off",
                        "unset NCCL_MNNVL_ENABLE unless you mean to run over the network")]
    if found or mnnvl_node:
        return [ok("imex.mnnvl.ok", f"{shown}; NCCL_MNNVL_ENABLE={value}")]
    return []


_FIX = ("give the container an IMEX channel (the NVIDIA DRA driver's ComputeDomain, or bind "
        "/dev/nvidia-caps-imex-channels/channel0 with nvidia-imex running)")
