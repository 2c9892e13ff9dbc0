"""A site's NCCL net plugin and libfabric, injected into the container, put ahead of the
image's own. Pure: reads only under the root it is given.

EFA and Slingshot reach NCCL only through the aws-ofi-nccl net plugin and the fabric's
own libfabric (the EFA installer's /opt/amazon/efa; HPE's libfabric and libcxi on
Slingshot). Sites inject both into containers: CSCS through container-engine hooks, NERSC
through podman-hpc modules, others by bind mounts. torchpod looks, in order, at:

- ``TORCHPOD_SITE_LIB`` (directories, ':'-separated): authoritative; a directory that is
  missing or holds no ``libnccl-net*.so`` is an error, never a silent fallback;
- ``/opt/torchpod/site/lib`` and ``/opt/torchpod/site/deps``: the documented mount
  points for a site's plugin and libfabric, and for their dependencies (libcxi.so.1);
- the host paths the vendors install to: ``/opt/amazon/ofi-nccl/lib`` and
  ``/opt/amazon/efa/lib{,64}`` (AWS EFA installer), ``/opt/cray/libfabric/*/lib64`` (HPE).

The launcher prepends the directories found to LD_LIBRARY_PATH, so NCCL's
``dlopen("libnccl-net.so")`` and the plugin's ``libfabric.so.1`` resolve there first: the
image can never shadow the host's libfabric.
"""

from __future__ import annotations

import glob
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ..contract import ENV_SITE_LIB, IMAGE_PLUGIN, SITE_DEPS, SITE_LIB, setting
from ..errors import InputError
from . import efa, slingshot

# The vendors' install paths, from the fabric records (EFA's before HPE's, as before they
# were records: the order is LD_LIBRARY_PATH's when a node has both).
HOST_DIRS = (*efa.FABRIC.lib_dirs, *slingshot.FABRIC.lib_dirs)
# NCCL tries libnccl-net.so when NCCL_NET_PLUGIN is unset; aws-ofi-nccl >= 1.15 installs
# libnccl-net-ofi.so beside it.
PLUGIN_NAMES = ("libnccl-net.so", "libnccl-net-ofi.so")


@dataclass(frozen=True)
class SiteLibs:
    dirs: tuple[str, ...] = ()  # to prepend to LD_LIBRARY_PATH, in order
    plugin: str | None = None  # the plugin file NCCL's default name resolves to
    libfabric: str | None = None  # the libfabric.so.1 found beside it
    source: str = ""  # "TORCHPOD_SITE_LIB", the mount point, or "host paths"


def _under(root: Path, path: str) -> Path:
    return root / path.lstrip("/")


def _is_dir(path: Path) -> bool:
    """Path.is_dir that answers False for a name the file system cannot hold (ENAMETOOLONG,
    a NUL), which pathlib would raise."""
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def _has_entries(path: Path) -> bool:
    try:
        return _is_dir(path) and any(path.iterdir())
    except OSError:
        return False


def _plugin_in(root: Path, d: str) -> str | None:
    for name in PLUGIN_NAMES:
        try:
            found = _under(root, f"{d}/{name}").is_file()
        except (OSError, ValueError):  # a directory name too long to hold a file
            found = False
        if found:
            return f"{d}/{name}"
    others = sorted(glob.glob(str(_under(root, f"{d}/libnccl-net*.so"))))
    return "/" + str(Path(others[0]).relative_to(root)) if others else None


def find(env: Mapping[str, str], root: Path = Path("/")) -> SiteLibs:
    """The site's plugin and libfabric directories, or SiteLibs() when none is injected."""
    var = ENV_SITE_LIB.name
    given = setting(env, ENV_SITE_LIB)  # blank is unset, as enroot's `--env NAME` hands an unset name
    if given:
        dirs = [d for d in given.split(":") if d]
        for d in dirs:
            if not _is_dir(_under(root, d)):
                raise InputError(f"{var} has {d!r}, which is not a directory; expected the "
                                 "directory the site's NCCL net plugin is mounted in")
        plugin = next((p for p in (_plugin_in(root, d) for d in dirs) if p), None)
        if plugin is None:
            raise InputError(f"{var}={given!r} holds no libnccl-net*.so; expected the directory "
                             "with the site's aws-ofi-nccl plugin (libnccl-net.so) and its libfabric.so.1")
        source = var
    else:
        dirs = []
        for pattern in (SITE_LIB, SITE_DEPS, *HOST_DIRS):
            for d in sorted(glob.glob(str(_under(root, pattern)))):
                dirs.append("/" + str(Path(d).relative_to(root)))
        dirs = [d for d in dirs if _plugin_in(root, d) or _under(root, f"{d}/libfabric.so.1").exists()
                or (d == SITE_DEPS and _has_entries(_under(root, d)))]
        plugin = next((p for p in (_plugin_in(root, d) for d in dirs) if p), None)
        if not dirs:
            return SiteLibs()
        source = "the mount point " + SITE_LIB if dirs[0] == SITE_LIB else "host paths"
    libfabric = next((f"{d}/libfabric.so.1" for d in dirs if _under(root, f"{d}/libfabric.so.1").exists()), None)
    return SiteLibs(tuple(dirs), plugin, libfabric, source)


def image_plugin(root: Path = Path("/")) -> str | None:
    """The image variant's own plugin (absolute path), if this image carries one."""
    return IMAGE_PLUGIN if _under(root, IMAGE_PLUGIN).is_file() else None
