"""Read the versions an image really holds; runs *inside* the image (stdlib only).

``python -m torchpod.probe [--import-torch]`` prints one JSON object. The build
(torchpod_toolkit.imagebuild.probe, on the build host)
compares it with the definition and writes it into labels, so labels come from reality,
not the YAML.

torchvision's comes from its ``version.py``. NCCL's version comes from calling
``ncclGetVersion`` in the ``libnccl.so.2`` torch loads (what ``torch.cuda.nccl.version()``
does too), and torch's from ``torch/version.py``;
``--import-torch`` then imports torch and cross-checks both. The build always passes it;
under QEMU it needs the sysfs stand-in of ``torchpod_toolkit.imagebuild.host.emulation_volumes``.
It lives in the launcher package because it runs inside the image.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import platform
import re
import subprocess
import sys
from pathlib import Path

from . import readers
from .contract import IMAGE_PLUGIN_DIR
from .errors import InputError

NETPLUGIN_DIR = Path(IMAGE_PLUGIN_DIR)  # an image variant's own net plugin
VERSION_FILE_CAP = 64 << 10  # a package's version.py: a few assignments


def site_packages() -> Path:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("probe: torch is not installed in this Python")
    return Path(list(spec.submodule_search_locations)[0]).parent


def libnccl(site: Path) -> Path:
    found = sorted(site.glob("nvidia/nccl*/lib/libnccl.so.2"))
    if not found:
        raise SystemExit(f"probe: no libnccl.so.2 under {site}/nvidia")
    return found[0]


def nccl_version(lib: Path) -> str:
    code = ctypes.c_int()
    if ctypes.CDLL(str(lib)).ncclGetVersion(ctypes.byref(code)) != 0:
        raise SystemExit(f"probe: ncclGetVersion failed in {lib}")
    # NCCL >= 2.9 encodes MAJOR*10000 + MINOR*100 + PATCH (nccl.h, NCCL_VERSION_CODE)
    value = code.value
    return f"{value // 10000}.{value % 10000 // 100}.{value % 100}"


def _version_file(path: Path) -> str | None:
    """A package's version.py through the bounded reader; None when it cannot be read (not
    installed). Anything else there (a FIFO, a device, a huge or undecodable file) ends the
    probe with one line."""
    try:
        return readers.read_text(path, what=str(path), expected="a package's version.py", cap=VERSION_FILE_CAP)
    except readers.Unreadable:
        return None
    except InputError as exc:
        raise SystemExit(f"probe: {exc}") from None


def torch_version_file(site: Path) -> dict[str, str]:
    text = _version_file(site / "torch" / "version.py")
    if text is None:
        raise SystemExit(f"probe: {site / 'torch' / 'version.py'} cannot be read; expected torch's version file")
    namespace: dict = {}
    exec(text, namespace)  # a file of plain assignments
    return {"torch": namespace["__version__"], "cuda": namespace.get("cuda") or ""}


def torchvision_version_file(site: Path) -> str:
    """torchvision's version from its version.py, whose first line assigns it (the file
    goes on to import torchvision's extension, so it is read, not executed)."""
    text = _version_file(site / "torchvision" / "version.py")
    if text is None:  # not installed
        return ""
    m = re.search(r"^__version__ = ['\"]([^'\"]+)['\"]", text, flags=re.M)
    return m.group(1) if m else ""


def dpkg_version(package: str) -> str:
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package],
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return ""
    # "44.0-2" -> upstream rdma-core "44.0"; keep epochs and Debian revisions out of labels.
    return out.split(":")[-1].rsplit("-", 1)[0]


def libfabric() -> str:
    """The image's libfabric.so.1: ``fi_version()`` and its ABI, e.g. "1.17 (FABRIC_1.6)"."""
    import ctypes

    from .netplugin import _abi, _mapped

    try:
        v = ctypes.CDLL("libfabric.so.1").fi_version()
    except (OSError, AttributeError):
        return ""
    path = _mapped(r"^libfabric\.so")
    return f"{(v >> 16) & 0xFFFF}.{v & 0xFFFF} ({(_abi(path) if path else None) or '?'})"


def probe(import_torch: bool) -> dict[str, str]:
    site = site_packages()
    lib = libnccl(site)
    found = {
        "machine": platform.machine(),
        "python": platform.python_version(),
        **torch_version_file(site),
        "torchvision": torchvision_version_file(site),
        "nccl": nccl_version(lib),
        "libnccl": str(lib),
        "rdma-core": dpkg_version("libibverbs1"),
        "libfabric": libfabric() if NETPLUGIN_DIR.exists() else "",
        "torch_imported": "no",
    }
    if import_torch:
        import torch
        import torchvision  # loads its compiled ops against this torch

        seen = {"torch": torch.__version__, "cuda": torch.version.cuda or "",
                "nccl": ".".join(str(p) for p in torch.cuda.nccl.version()),
                "torchvision": torchvision.__version__}
        for key, value in seen.items():
            if value != found[key]:
                raise SystemExit(f"probe: {key} is {value!r} after import torch but {found[key]!r} on disk")
        found["torch_imported"] = "yes"
    return found


if __name__ == "__main__":
    print(json.dumps(probe("--import-torch" in sys.argv[1:]), sort_keys=True))
