"""Read the versions an image really holds; runs *inside* the image (stdlib + torch).

``python -m torchpod.build.probe`` prints one JSON object. The build compares it with
the definition and writes it into labels, so labels come from reality, not the YAML.
"""

from __future__ import annotations

import json
import platform
import subprocess
from pathlib import Path

AWS_OFI_NCCL_VERSION_FILE = Path("/opt/aws-ofi-nccl/VERSION")


def _dpkg_version(package: str) -> str:
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return ""
    # "44.0-2" -> upstream rdma-core "44.0"; keep epochs and revisions out of labels.
    return out.split(":")[-1].rsplit("-", 1)[0]


def probe() -> dict[str, str]:
    import torch

    nccl = torch.cuda.nccl.version() if hasattr(torch.cuda, "nccl") else ()
    return {
        "machine": platform.machine(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "",
        "nccl": ".".join(str(part) for part in nccl),
        "rdma-core": _dpkg_version("libibverbs1"),
        "aws-ofi-nccl": AWS_OFI_NCCL_VERSION_FILE.read_text().strip()
        if AWS_OFI_NCCL_VERSION_FILE.exists()
        else "",
    }


if __name__ == "__main__":
    print(json.dumps(probe(), sort_keys=True))
