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

from .words import plural

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


def visible(env: Mapping[str, str], listed: int | None) -> tuple[int, str]:
    """(GPUs this process may use, why): the one count the plan's nproc and the doctor share.
    ``listed``: the GPUs `nvidia-smi -L` printed (None when it was not asked or did not answer)."""
    cuda = env.get("CUDA_VISIBLE_DEVICES")
    if cuda is not None:
        n = visible_count(cuda)
        if not n:
            return 0, f"CUDA_VISIBLE_DEVICES={cuda!r} hides every GPU"
        return n, f"{plural(n, 'GPU')} in CUDA_VISIBLE_DEVICES"
    nvidia = env.get("NVIDIA_VISIBLE_DEVICES")
    if nvidia is not None and nvidia.strip().lower() in _NO_GPU:
        return 0, f"NVIDIA_VISIBLE_DEVICES={nvidia!r} exposes no GPU"
    if nvidia is not None and nvidia.strip().lower() != "all":
        n = visible_count(nvidia)
        if n:
            return n, f"{plural(n, 'GPU')} in NVIDIA_VISIBLE_DEVICES"
    if listed:
        return listed, f"{plural(listed, 'GPU')} listed by `nvidia-smi -L`"
    return 0, "no GPU visible"


def default_nproc(env: Mapping[str, str], gpu_count: int | None) -> tuple[str, str]:
    """(nproc_per_node, why) from visible GPUs; 1 on a CPU-only node."""
    n, why = visible(env, gpu_count)
    if n:
        return str(n), why
    return "1", f"{why}: 1 CPU process"
