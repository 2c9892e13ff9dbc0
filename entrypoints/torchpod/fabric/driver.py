"""The node's NVIDIA driver against the CUDA this image bundles.

Minimum drivers (Linux), from NVIDIA's CUDA Toolkit release notes, "CUDA Toolkit and
Corresponding Driver Versions" (docs.nvidia.com/cuda/cuda-toolkit-release-notes, the 12.6,
12.8 and 13.0 notes) and the data-center support matrix
(docs.nvidia.com/datacenter/tesla/drivers/supported-drivers-and-cuda-toolkit-versions.html):

- a toolkit's GA driver: 13.0 >= 580.65.06, 12.9 >= 575.51.03, 12.8 >= 570.26, 12.6 >= 560.28.03, 12.4 >=
  550.54.14, 12.0 >= 525.60.13;
- minor version compatibility: a 12.x build runs on any driver >= 525.60.13 (R535, R570),
  a 13.x build on >= 580 (R580), without the features that need the newer driver (PTX JIT).

So a driver under the major's floor fails (CUDA initialisation errors out); one at or over
the floor but under the toolkit's GA driver is a warning. The node's version is the
"Kernel Module" line of /proc/driver/nvidia/version (proprietary and open modules).
"""

from __future__ import annotations

import re
from pathlib import Path

from .. import readers
from ..errors import InputError
from .findings import Finding, Severity, ok

Version = tuple[int, ...]
# (CUDA major.minor, its GA driver), newest first
GA_DRIVER: tuple[tuple[tuple[int, int], Version], ...] = (
    ((13, 0), (580, 65, 6)),
    ((12, 9), (575, 51, 3)),
    ((12, 8), (570, 26)),
    ((12, 6), (560, 28, 3)),
    ((12, 4), (550, 54, 14)),
    ((12, 0), (525, 60, 13)),
)
MAJOR_FLOOR: dict[int, Version] = {13: (580,), 12: (525, 60, 13)}
VERSION_FILE = "driver/nvidia/version"  # under /proc
_KERNEL_RE = re.compile(r"Kernel Module\b[^\n]*?\s([0-9]{3,4})\.([0-9]{1,3})(?:\.([0-9]{1,3}))?(?=\s|$)", re.ASCII)


def parse(text: str) -> Version | None:
    """The driver version in /proc/driver/nvidia/version's text, or None."""
    m = _KERNEL_RE.search(text)
    return tuple(int(x) for x in m.groups() if x is not None) if m else None


def node_driver(proc_root: Path) -> tuple[Version | None, str]:
    """(the node's driver version or None, why it is None)."""
    try:
        text = readers.read_text(proc_root / VERSION_FILE, what=f"/proc/{VERSION_FILE}", cap=readers.ATTR_CAP,
                                 expected="the NVIDIA kernel module's version text")
    except InputError as exc:
        return None, str(exc)
    version = parse(text)
    return version, "" if version else f"/proc/{VERSION_FILE} holds no 'Kernel Module <version>' line"


def _text(v: Version) -> str:
    return ".".join(f"{x:02d}" if i == 2 else str(x) for i, x in enumerate(v))


def judge(driver: Version | None, why: str, cuda: tuple[int, int] | None, cuda_why: str = "") -> Finding:
    """One finding: the driver against the bundled CUDA."""
    if cuda is None:
        return ok("driver.cuda.unknown", f"the bundled CUDA version is unknown{f' ({cuda_why})' if cuda_why else ''}: "
                  "driver not judged")
    if driver is None:
        return Finding("driver.version.unknown", Severity.WARN, f"cannot read the node's driver version ({why})",
                       "run with the NVIDIA container runtime (it mounts /proc/driver/nvidia)")
    floor = MAJOR_FLOOR.get(cuda[0])
    shown = f"CUDA {cuda[0]}.{cuda[1]}"
    if floor is None:
        return ok("driver.cuda.untabled", f"{shown}: no minimum driver in torchpod's table; node has {_text(driver)}")
    ga = dict(GA_DRIVER).get(cuda, floor)  # a minor not in the table: judged by its major's floor
    if driver < floor:
        return Finding("driver.version.too-old", Severity.FAIL, f"this image needs driver >= {_text(floor)} "
                       f"({shown}), the node has {_text(driver)}: CUDA will not initialise",
                       f"upgrade the node's driver to >= {_text(ga)}, or use an image variant built for an older CUDA")
    if driver < ga:
        return Finding("driver.version.minor-compat", Severity.WARN, f"{shown} wants driver >= {_text(ga)}, the node "
                       f"has {_text(driver)}: it runs through minor version compatibility, without PTX JIT",
                       f"upgrade the node's driver to >= {_text(ga)}")
    return ok("driver.version.ok", f"driver {_text(driver)} >= {_text(ga)}, {shown}'s")


_TORCH_CUDA_RE = re.compile(r"^cuda\b[^=\n]*=\s*['\"]([0-9]{1,3})\.([0-9]{1,3})", re.M | re.ASCII)


def cuda_of(text: str) -> tuple[int, int] | None:
    """The CUDA version torch was built with, from its torch/version.py (``cuda = '12.8'``)."""
    m = _TORCH_CUDA_RE.search(text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def torch_cuda() -> tuple[tuple[int, int] | None, str]:
    """(the image's torch's CUDA, why None): torch/version.py read as text, torch not imported
    (importing it takes seconds and may touch the driver being judged). Impure: doctor.gather."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError) as exc:
        return None, f"torch cannot be found ({exc})"
    if spec is None or not spec.submodule_search_locations:
        return None, "no torch in this image"
    path = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    try:
        text = readers.read_text(path, what=str(path), cap=readers.ATTR_CAP, expected="torch's version module")
    except InputError as exc:
        return None, str(exc)
    cuda = cuda_of(text)
    return cuda, "" if cuda else f"{path} names no CUDA (a CPU build of torch)"
