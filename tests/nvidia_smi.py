"""Recorded ``Fabric`` sections of `nvidia-smi -q`, and the whole output a node's GPUs print
around them, for the NVLink-domain reader (torchpod.fabric.nvlink) and the stand-in
``nvidia-smi`` the cluster tier puts on containers as nodes (no GPU exists here).

Each section is copied as posted, whitespace kept; where a test needs a second domain it
changes one value and says so. The lines around them (the log header, each GPU's header
``GPU 00000008:01:00.0`` and a section after Fabric) follow the layout of the same captures.
"""

from __future__ import annotations

# A GB200 NVL72 node in a multi-node NVLink domain (its Health summary was Unhealthy when
# posted; State and Status are what place a GPU in the domain).
# https://github.com/NVIDIA/k8s-dra-driver-gpu/issues/626 (issue text, 2025-09-26)
MNNVL = """\
    Fabric
        State                             : Completed
        Status                            : Success
        CliqueId                          : 2
        ClusterUUID                       : dc6e40c4-d722-4357-9ba6-5291dd461278
        Health
            Summary                       : Unhealthy
            Bandwidth                     : Full
"""
MNNVL_DOMAIN = "dc6e40c4-d722-4357-9ba6-5291dd461278.2"

# An HGX H100 board (8x H100 80GB HBM3, driver 565.57.01): its NVSwitches are trained, and
# there is no multi-node domain: the zero cluster UUID and clique 0.
# https://github.com/thamada/nvidia-smi/blob/03fbe6e68c0bb4c28b72d5da786a9712a33cf408/nvsim/H100SXMx8_smi.py#L275-L281
HGX = """\
    Fabric
        State                             : Completed
        Status                            : Success
        CliqueId                          : 0
        ClusterUUID                       : 00000000-0000-0000-0000-000000000000
        Health
            Bandwidth                     : N/A
"""

# A board without an NVLink fabric (2x H100 NVL, PCIe, driver 550.54.14)
# https://github.com/thamada/nvidia-smi/blob/c4c8a463a61e4ac67e3d7956da104b302760a498/gls/H100NVLx2_smi.py#L244-L250
NO_FABRIC = """\
    Fabric
        State                             : N/A
        Status                            : N/A
        CliqueId                          : N/A
        ClusterUUID                       : N/A
        Health
            Bandwidth                     : N/A
"""

# A fabric still training (driver 580.159.04): the key column is wider in this driver.
# https://github.com/NVIDIA/gpu-operator/issues/2511
IN_PROGRESS = """\
    Fabric
        State                                          : In Progress
        Status                                         : N/A
        CliqueId                                       : N/A
        ClusterUUID                                    : N/A
"""


def other_clique(section: str, clique: str) -> str:
    """``section`` with another clique id: a second NVLink domain of the same cluster (GB300
    captures report 32766, NVIDIA/k8s-test-infra tests/e2e/go/assertions/nvidiasmi/testdata)."""
    return section.replace("CliqueId                          : 2", f"CliqueId                          : {clique}")


def q_output(sections: list[str], product: str = "NVIDIA GB200") -> str:
    """What `nvidia-smi -q` prints for GPUs whose Fabric sections are ``sections``."""
    lines = ["", "==============NVSMI LOG==============", "",
             "Timestamp                                 : Thu Sep 25 10:02:11 2025",
             "Driver Version                            : 580.173.02",
             "CUDA Version                              : 13.0", "",
             f"Attached GPUs                             : {len(sections)}"]
    for index, section in enumerate(sections):
        lines += [f"GPU 00000008:{index + 1:02X}:00.0",
                  f"    Product Name                          : {product}",
                  "    Product Brand                         : NVIDIA",
                  *section.rstrip("\n").splitlines(),
                  "    Processes                             : None", ""]
    return "\n".join(lines) + "\n"


# The stand-in: what the recorded file holds for `-q`, and a refusal for anything else (the
# launcher asks nothing more of nvidia-smi for ranks; CUDA_VISIBLE_DEVICES answers -L).
RECORDED = "/etc/torchpod-stand-in/nvidia-smi-q.txt"
STAND_IN = f"""#!/bin/sh
# nvidia-smi stand-in: prints the recorded `nvidia-smi -q` of this node (tests/nvidia_smi.py)
if [ "$#" -eq 1 ] && [ "$1" = "-q" ]; then exec cat {RECORDED}; fi
echo "nvidia-smi stand-in: only -q is recorded here, not: $*" >&2
exit 2
"""
