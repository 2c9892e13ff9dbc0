"""How many processes a node starts when nobody says: the GPUs it can see, else 1.

CUDA_VISIBLE_DEVICES (CUDA runtime) is applied inside whatever NVIDIA_VISIBLE_DEVICES
(nvidia-container-toolkit) exposed, so it is read first. The toolkit's special values:
``all`` (every GPU: count them with `nvidia-smi -L`), ``none`` (driver but no GPU),
``void`` or empty (no GPU runtime at all). Entries may be indices, ``GPU-<uuid>`` or
``MIG-<uuid>``; CUDA stops at the first invalid index (e.g. ``-1``).
"""

from __future__ import annotations

import re
from typing import Mapping

_NO_GPU = {"", "none", "void", "no-dev-files"}


def visible_count(value: str) -> int:
    """GPUs a CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES list names."""
    count = 0
    for entry in value.split(","):  # ASCII digits only: Python's \d would also count '٣' as an index
        entry = entry.strip()
        if re.fullmatch(r"[0-9]+", entry) or re.match(r"(GPU|MIG)-[0-9A-Za-z-]+", entry):
            count += 1
        else:
            break  # CUDA ignores everything from the first invalid entry on
    return count


def needs_probe(env: Mapping[str, str]) -> bool:
    """Whether the answer depends on `nvidia-smi -L` (main() then runs it)."""
    if env.get("CUDA_VISIBLE_DEVICES") is not None:
        return False
    nvidia = env.get("NVIDIA_VISIBLE_DEVICES")
    return nvidia is None or nvidia.strip().lower() == "all"


def default_nproc(env: Mapping[str, str], gpu_count: int | None) -> tuple[str, str]:
    """(nproc_per_node, why) from visible GPUs; 1 on a CPU-only node."""
    cuda = env.get("CUDA_VISIBLE_DEVICES")
    if cuda is not None:
        n = visible_count(cuda)
        if n:
            return str(n), f"{n} GPUs in CUDA_VISIBLE_DEVICES"
        return "1", f"CUDA_VISIBLE_DEVICES={cuda!r} hides every GPU: 1 CPU process"
    nvidia = env.get("NVIDIA_VISIBLE_DEVICES")
    if nvidia is not None and nvidia.strip().lower() in _NO_GPU:
        return "1", f"NVIDIA_VISIBLE_DEVICES={nvidia!r}: no GPU, 1 CPU process"
    if nvidia is not None and nvidia.strip().lower() != "all":
        n = visible_count(nvidia)
        if n:
            return str(n), f"{n} GPUs in NVIDIA_VISIBLE_DEVICES"
    if gpu_count:
        return str(gpu_count), f"{gpu_count} GPUs listed by `nvidia-smi -L`"
    return "1", "no GPU visible: 1 CPU process"
