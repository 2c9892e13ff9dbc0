"""NCCL_* and FI_* names nobody reads: a misspelt variable is silently ignored by NCCL and
libfabric, so the doctor names it and the nearest real name (difflib).

The known names are a data file beside this module (known_names.json), each list with the
release and commit it was read from and how: NCCL's from NVIDIA/nccl v2.30.7-1 src/
(NCCL_PARAM, DEFINE_NCCL_PARAM, ncclGetEnv/getenv and ncclGetLevel names), the legacy
NCCL_* names torch still reads (ProcessGroupNCCL.hpp), libfabric's from ofiwg/libfabric
v2.6.0 (fi_param_define: core as FI_X, the EFA and CXI providers as FI_EFA_X, FI_CXI_X).
Other providers' FI_<PROV>_* names are not judged (their lists are not carried). Labels are
names images set to describe themselves (nvidia/cuda's ``NCCL_VERSION``): NCCL reads none,
and the doctor says so in an OK row instead of asking to remove them.

Judged: every NCCL_* name; FI_EFA_*, FI_CXI_*; any other FI_* name whose second part is no
provider's; and any other upper-case name that is a near miss of a NCCL name (the dropped
N of CCL_NET_GDR_LEVEL). Pure: takes the environment as NCCL sees it (ncclconf.merged).
"""

from __future__ import annotations

import difflib
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Mapping

from .. import readers
from .findings import Finding, Severity

NAMES_FILE = Path(__file__).with_name("known_names.json")
_NAME_RE = re.compile(r"[A-Z][A-Z0-9_]{2,127}", re.ASCII)
# libfabric's provider directories (ofiwg/libfabric v2.6.0 prov/): FI_<PROV>_* belongs to them
_PROVIDERS = ("COLL", "CXI", "EFA", "HOOK", "LNX", "LPP", "MRAIL", "OPX", "PSM2", "PSM3", "RXD", "RXM", "SHM",
              "SM2", "SOCKETS", "TCP", "UCX", "UDP", "USNIC", "UTIL", "VERBS", "OFI")
NEAR = 0.85  # difflib ratio for "did you mean"
NEAR_OTHER = 0.9  # a name without the NCCL_ prefix must be this close to count as a misspelling


def _names() -> dict:
    """known_names.json, which torchpod ships, through the bounded reader."""
    return json.loads(readers.read_text(NAMES_FILE, what=str(NAMES_FILE), expected="the names torchpod ships",
                                        cap=readers.DATA_CAP))


@lru_cache(maxsize=1)
def labels_known() -> dict[str, str]:
    """{name: what it labels} for the variables images set that NCCL never reads."""
    return dict(_names()["labels"]["names"])


@lru_cache(maxsize=1)
def known() -> tuple[frozenset[str], dict[str, tuple[str, ...]]]:
    """(every NCCL_* name read, {libfabric scope: its FI_* names}); scope "" is the core."""
    data = _names()
    nccl = frozenset(data["nccl"]["names"]) | frozenset(data["torch"]["names"])
    fi = {"": tuple(f"FI_{n}" for n in data["libfabric"]["core"])}
    fi.update({p: tuple(f"FI_{p}_{n}" for n in names) for p, names in data["libfabric"]["providers"].items()})
    return nccl, fi


def _scope(name: str, fi: dict[str, tuple[str, ...]]) -> tuple[str, ...] | None:
    """The names ``name`` must be one of, or None when it is not judged."""
    nccl, _ = known()
    if name.startswith("NCCL_"):
        return tuple(sorted(nccl))
    if name.startswith("FI_"):
        prov = name.split("_")[1]
        if prov in fi:
            return fi[prov]
        return None if prov in _PROVIDERS else fi[""]
    return None


def _finding(name: str, near: list[str], who: str) -> Finding:
    if near:
        return Finding("names.env.misspelt", Severity.WARN, f"{name} is read by no {who} release torchpod knows; "
                       f"did you mean {near[0]}?", f"rename it to {near[0]}")
    return Finding("names.env.unknown", Severity.WARN, f"{name} is read by no {who} release torchpod knows: it has "
                   "no effect", "remove it, or check the name in the NCCL/libfabric documentation")


def unknown(env: Mapping[str, str]) -> list[Finding]:
    """One WARN per variable NCCL or libfabric never reads, with the nearest real name."""
    nccl, fi = known()
    every_fi = {n for names in fi.values() for n in names}
    out = []
    for name in sorted(env):
        if not _NAME_RE.fullmatch(name) or name in nccl or name in every_fi or name in labels_known():
            continue
        scope = _scope(name, fi)
        if scope is not None:
            near = difflib.get_close_matches(name, scope, n=1, cutoff=NEAR)
            out.append(_finding(name, near, "NCCL" if name.startswith("NCCL_") else "libfabric"))
        elif "CCL" in name or name.startswith("NCL"):
            near = difflib.get_close_matches(name, sorted(nccl), n=1, cutoff=NEAR_OTHER)
            if near:
                out.append(_finding(name, near, "NCCL"))
    return out


def labels(env: Mapping[str, str]) -> list[Finding]:
    """One OK row per label an image set (``NCCL_VERSION``): NCCL reads none of them."""
    return [Finding("names.env.label", Severity.OK, f"{name} is a label images set ({what}): NCCL reads no such "
                    "variable; the NCCL that runs is the libnccl the loader finds (PyTorch's wheels bring their own)")
            for name, what in sorted(labels_known().items()) if name in env]
